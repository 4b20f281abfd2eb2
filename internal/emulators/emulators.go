// Package emulators decides what a test does when an emulator it needs cannot
// start: skip with a message naming the command that installs it, or, under
// ZONALBLOB_REQUIRE_EMULATORS=1 (as CI sets), fail.
package emulators

import (
	"net"
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

// Blackhole returns the address of a listener on 127.0.0.1 that accepts
// connections and never answers, as an endpoint that is down behind its load
// balancer; it closes with the test.
func Blackhole(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().String()
}

// Started returns a function that takes what an emulator's NewServer
// returned: it fails t on an error and closes the server when t ends. It is
// the body of every emulator's Start(t, opts), so that the three emulators
// start in tests the same way.
func Started[S interface{ Close() }](t testing.TB) func(S, error) S {
	return func(s S, err error) S {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
}
