// Package emulators decides what a test does when an emulator it needs cannot
// start: skip with a message naming the command that installs it, or, under
// ZONALBLOB_REQUIRE_EMULATORS=1 (as CI sets), fail.
package emulators

import (
	"os"
	"testing"
)

// RequireEnv is the environment variable that turns a missing emulator into
// a test failure.
const RequireEnv = "ZONALBLOB_REQUIRE_EMULATORS"

// Required reports whether missing emulators must fail tests.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable ends t because the emulator name could not start (err says why):
// a failure when emulators are required, otherwise a skip that says how to
// get it.
func Unavailable(t testing.TB, name string, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s emulator unavailable and %s=1: %v", name, RequireEnv, err)
	}
	t.Skipf("%s emulator unavailable (%v); run `make test` to install it, or set ZONALBLOB_REQUIRE_EMULATORS=1 to make this a failure", name, err)
}
