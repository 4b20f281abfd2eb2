//go:build !race

package commitlog

// raceEnabled: see race_test.go.
const raceEnabled = false
