//go:build race

package commitlog

// raceEnabled: the tests run under the race detector, which slows
// porcupine's search by orders of magnitude on some histories.
const raceEnabled = true
