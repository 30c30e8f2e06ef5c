package session

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if goroutines outlive them, and turns
// the ownership checks on (owner.go) unless UCXNET_DEBUG_OWNERS is 0.
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
	cleanup := privateStatsDir()
	shardedByDefault()
	if os.Getenv(envDebugOwners) != "0" {
		checkOwners = true // the ownership checks (owner.go) run in the tests
	}
	// Without UCX (a build without cgo, or off Linux) the default transport
	// runs the kernel-TCP lane alone, or fails with testUCX.Unsupported when
	// UCXNET_LANE forces UCX; the tests that need UCX skip (needUCX).
	if _, err := DefaultTransport(); err != nil && !errors.Is(err, testUCX.Unsupported) {
		fmt.Fprintln(os.Stderr, "session tests: starting the default transport:", err)
		cleanup()
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(), goleak.Cleanup(func(int) { cleanup() }))
}

// newUCXTransport starts a transport on UCX (testUCX), as package ucxnet's
// NewTransport does.
func newUCXTransport(cfg Config) (*Transport, error) { return NewTransport(cfg, testUCX) }

// DefaultTransport is the tests' process-wide transport, as package
// ucxnet's default one: on UCX, never closed.
var DefaultTransport = sync.OnceValues(func() (*Transport, error) { return newUCXTransport(Config{}) })

// privateStatsDir points the tests' stats sockets (and their child
// processes', through the environment) at a directory of their own unless
// UCXNET_STATS_DIR is set: a child a test kills leaves its socket behind,
// which belongs in a directory removed with the test run, not in the
// user's. It returns the directory's removal.
func privateStatsDir() (cleanup func()) {
	if os.Getenv(EnvStatsDir) != "" {
		return func() {}
	}
	dir, err := os.MkdirTemp("", "ucxnet-stats-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "session tests:", err)
		os.Exit(1)
	}
	os.Setenv(EnvStatsDir, dir)
	return func() { os.RemoveAll(dir) }
}

// needUCX skips t when this build runs no UCX (built without cgo, or off
// Linux): t's conns or attacks go over UCX. The kernel-TCP lane's tests and
// the conn tests over the in-memory engine run in every build.
func needUCX(t testing.TB) {
	t.Helper()
	if !haveUCXBuild() {
		t.Skip("needs UCX, and this build has none (built without cgo or off Linux)")
	}
}

// shardedByDefault sets $UCXNET_WORKERS to 2 unless it is set: every
// transport the tests start without setting Config.Workers (pairs, the
// default transport, child processes, which inherit the environment) runs
// two workers, so that the suites (nettest, peer death, hostile input)
// exercise conns sharded across workers on any machine. One setting in
// one place, instead of a Workers in every test's Config;
// UCXNET_WORKERS=1 runs the same suites with one worker.
func shardedByDefault() {
	if os.Getenv(envWorkers) == "" {
		os.Setenv(envWorkers, "2")
	}
}
