package ucxnet

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if goroutines outlive them.
//
// The one thing legitimately long-lived is the process-wide default
// transport (DefaultTransport, used by the package-level Dial and Listen):
// it is never closed, so its progress engine goroutine
// (internal/progress.(*Engine).loop) runs until the process exits. That
// goroutine cannot be told apart from a leaked transport's by its stack —
// every engine's top frame is a syscall, a cgo call or runtime.Gosched, and
// every one runs (*Engine).loop — so IgnoreTopFunction/IgnoreAnyFunction
// on it would also hide transports that a test forgot to Close. Instead the
// default transport is started here, before the tests, and IgnoreCurrent
// ignores exactly the goroutines that exist now: its engine (and whatever
// else a transport may start), the runtime's and the testing package's.
// Every transport a test creates is still checked.
func TestMain(m *testing.M) {
	if dt, err := DefaultTransport(); err == nil && !dt.haveUCX() {
		// A build without UCX: the kernel-TCP lane's tests, the test of
		// that build and the conn tests over the in-memory engine apply.
		fmt.Fprintln(os.Stderr, "ucxnet tests: built without UCX, so only TestUnsupportedBuild, TestLane*, TestTCPLane* and TestMem* run")
		flag.Set("test.run", "^(TestUnsupportedBuild|TestLane.*|TestTCPLane.*|TestMem.*)$")
		goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
		return
	}
	if _, err := DefaultTransport(); err != nil {
		if errors.Is(err, ErrUnsupported) {
			// A build without UCX: the test of that build and the conn
			// tests over the in-memory engine apply.
			fmt.Fprintln(os.Stderr, "ucxnet tests: built without UCX, so only TestUnsupportedBuild and TestMem* run:", err)
			flag.Set("test.run", "^(TestUnsupportedBuild|TestMem.*)$")
			os.Exit(m.Run())
		}
		fmt.Fprintln(os.Stderr, "ucxnet tests: starting the default transport:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
