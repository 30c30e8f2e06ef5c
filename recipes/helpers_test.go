package recipes

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// pair is a server transport and a client transport on one registry: two
// UCX workers in one process talk over real UCX transports.
type pair struct {
	reg            registry.Registry
	server, client *ucxnet.Transport
	dialer         *ucxnet.Dialer
	listenCfg      *ucxnet.ListenConfig
}

// newPair returns a pair on reg (a fresh in-memory registry if nil),
// closed when the test ends.
func newPair(t *testing.T, reg registry.Registry) *pair {
	t.Helper()
	if reg == nil {
		reg = registry.NewMemory()
	}
	p := &pair{reg: reg}
	for _, tr := range []**ucxnet.Transport{&p.server, &p.client} {
		var err error
		if *tr, err = ucxnet.NewTransport(ucxnet.Config{Registry: reg, StatsDir: ucxnet.StatsOff}); err != nil {
			t.Fatalf("NewTransport: %v", err)
		}
		t.Cleanup(func() { (*tr).Close() })
	}
	p.dialer = &ucxnet.Dialer{Transport: p.client}
	p.listenCfg = &ucxnet.ListenConfig{Transport: p.server}
	return p
}

// listen publishes a fresh name on the server transport; the listener is
// closed when the test ends.
func (p *pair) listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := p.listenCfg.Listen(context.Background(), ucxnet.Network, "")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// forward serves ln by forwarding its conns to the Unix socket at path
// until the test ends.
func forward(t *testing.T, ln net.Listener, path string) {
	done := make(chan error, 1)
	go func() {
		done <- Forward(ln, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		})
	}()
	t.Cleanup(func() {
		ln.Close()
		if err := <-done; err != nil {
			t.Errorf("Forward: %v", err)
		}
	})
}

// lookPath finds a program in $PATH or in the extra directories (sbin
// folders that a user's $PATH may lack), or skips the test saying what is
// missing and what installs it.
func lookPath(t *testing.T, name, install string, extra ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range extra {
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Skipf("%s is not installed (%s)", name, install)
	return ""
}

// waitFile waits up to 20 s for path to exist, or fails the test with the
// server's output.
func waitFile(t *testing.T, path string, out func() string) {
	t.Helper()
	waitFor(t, path+" to appear", func() bool { _, err := os.Stat(path); return err == nil }, out)
}

// waitFor waits up to 20 s for ready to return true, or fails the test
// with the server's output.
func waitFor(t *testing.T, what string, ready func() bool, out func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s; server output:\n%s", what, out())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ctxFor returns a context that ends after d or when the test ends.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// output collects a server's stdout and stderr; safe for the goroutines
// that exec starts to copy them.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(b)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
