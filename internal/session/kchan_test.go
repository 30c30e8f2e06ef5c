//go:build linux

package session

import (
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/kchan"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// A peer is vouched for shared memory only with the same UCX release, in
// the same IPC namespace, with its process visible here.
func TestKChanVouch(t *testing.T) {
	k := &chans{self: kchan.Hello{Release: "1.13.1", IPCNS: 42}}
	for _, tc := range []struct {
		hello kchan.Hello
		pid   int32
		ok    bool
		why   string
	}{
		{kchan.Hello{Release: "1.13.1", IPCNS: 42}, 7, true, ""},
		{kchan.Hello{Release: "1.18.1", IPCNS: 42}, 7, false, "UCX 1.13.1 here, 1.18.1 there"},
		{kchan.Hello{Release: "1.13.1", IPCNS: 43}, 7, false, "another IPC namespace"},
		{kchan.Hello{Release: "1.13.1"}, 7, false, "another IPC namespace"},
	} {
		ok, why := k.vouch(&kchan.Chan{Hello: tc.hello, Cred: kchan.Cred{PID: tc.pid}})
		require.Equal(t, tc.ok, ok, "%+v", tc)
		require.Contains(t, why, tc.why)
	}
	require.True(t, trusted(kchan.Cred{UID: uint32(os.Geteuid())}))
	if os.Geteuid() != 65534 {
		require.False(t, trusted(kchan.Cred{UID: 65534}))
	}
}

// stripRecorder replaces tr's stripShm with one that records the
// addresses it is asked to strip and returns them as they are.
func stripRecorder(tr *Transport) func() []string {
	var mu sync.Mutex
	var got []string
	tr.stripShm = func(a []byte) ([]byte, error) {
		mu.Lock()
		got = append(got, string(a))
		mu.Unlock()
		return a, nil
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// Every address a CONNECT names reaches Worker.Connect through the one
// decision, ucxAddr: stripped of shared memory unless a trusted channel
// vouched for it. A dialer the kernel never vouched for (here: no
// channel at all) is stripped; one with a vouching link is not.
func TestMemConnectAddressStripped(t *testing.T) {
	p := newMemPair(t, Config{})
	stripped := stripRecorder(p.server)
	c, s := p.conns(t)
	defer c.Close()
	defer s.Close()
	clientAddr := string(p.client.eng.Address())
	require.Contains(t, stripped(), clientAddr, "an unvouched CONNECT's address went to Connect unstripped")

	// A second dialer whose addresses a vouching channel delivered.
	other := p.newT(Config{Registry: p.server.reg, StatsDir: StatsOff, Workers: 1})
	defer other.Close()
	k := &p.server.kc
	k.byAddr = map[string]*link{string(other.eng.Address()): {shm: true}}
	d := Dialer{Transport: other, Timeout: 10 * time.Second}
	oc, err := d.Dial(Network, p.ln.Addr().String())
	require.NoError(t, err)
	defer oc.Close()
	sc, err := p.ln.Accept()
	require.NoError(t, err)
	defer sc.Close()
	require.NotContains(t, stripped(), string(other.eng.Address()), "a vouched address was stripped")
}

// An address left with no transport once its shared memory is removed is
// refused at once (ECONNREFUSED), never handed to the engine.
func TestMemOnlySharedMemoryRefused(t *testing.T) {
	p := newMemPair(t, Config{})
	p.client.stripShm = func([]byte) ([]byte, error) { return nil, nil }
	start := time.Now()
	_, err := p.dialer.Dial(Network, p.ln.Addr().String())
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorContains(t, err, "shared memory")
	require.Less(t, time.Since(start), 5*time.Second, "refused at once, not after the answer wait")
}

// needSm skips t unless this run's UCX_TLS lets UCX use shared memory.
func needSm(t *testing.T) {
	t.Helper()
	needUCX(t)
	tls := os.Getenv("UCX_TLS")
	if tls != "" && !strings.Contains(tls, "sm") && !strings.Contains(tls, "posix") && !strings.Contains(tls, "sysv") && !strings.Contains(tls, "all") {
		t.Skipf("UCX_TLS=%q: no shared memory to vouch for", tls)
	}
}

// usesShm reports whether a UCX transport list carries shared memory.
func usesShm(tl []string) bool {
	for _, s := range tl {
		for _, sm := range []string{"posix", "sysv", "cma", "knem", "xpmem"} {
			if strings.HasPrefix(s, sm) {
				return true
			}
		}
	}
	return false
}

// Two transports of one process (one user, channels up) run over shared
// memory; one that has no kernel channel (UCXNET_KCHAN=0) reaches the
// same listener only over UCX's tcp, in both directions, and its conn's
// Lane says why.
func TestKChanSharedMemoryOnlyVouched(t *testing.T) {
	needSm(t)
	if !ucxconf.TCPEnabled(os.Getenv("UCX_TLS")) {
		t.Skipf("UCX_TLS=%q: no tcp for the unvouched pair", os.Getenv("UCX_TLS"))
	}
	reg := registry.NewMemory()
	srv, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
	require.NoError(t, err)
	defer srv.Close()
	ln, err := (&ListenConfig{Transport: srv}).Listen(t.Context(), "kchan-shm")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(s, s); s.Close() }()
		}
	}()
	vouched, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
	require.NoError(t, err)
	defer vouched.Close()
	t.Setenv(EnvKChan, "0")
	unvouched, err := newUCXTransport(Config{Registry: reg, Lane: LaneUCX})
	require.NoError(t, err)
	defer unvouched.Close()

	for _, tc := range []struct {
		tr  *Transport
		shm bool
	}{{vouched, true}, {unvouched, false}} {
		c, err := (&Dialer{Transport: tc.tr, Timeout: 10 * time.Second}).Dial(Network, "kchan-shm")
		require.NoError(t, err)
		roundTrip(t, c, "over the conn")
		tl := c.(*testConn).Transports()
		_, why := c.(*testConn).Lane()
		t.Logf("vouched %v: transports %v, lane reason %q", tc.shm, tl, why)
		require.Equal(t, tc.shm, usesShm(tl), "transports %v", tl)
		c.Close()
	}
	// The listener's side of the unvouched pair: its endpoint to the
	// dialer was made from a stripped address too.
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	for _, s := range srv.shards {
		for addr, p := range s.peers {
			if ok, _ := srv.kc.shmVouched([]byte(addr)); !ok {
				require.False(t, usesShm(s.eng.Stats(p.ep).Transports), "an unvouched peer's endpoint carries shared memory")
			}
		}
	}
}

// A Read blocked on a conn to a same-host peer that is SIGKILLed and not
// reaped (a zombie, which UCX's shared memory counts as alive) fails with
// ECONNRESET as soon as the kernel closes the peer's channel: keepalive is
// an hour, so nothing else could tell.
func TestKChanPeerExitUnreaped(t *testing.T) {
	needUCX(t)
	dir := t.TempDir()
	child := startChild(t, dir, "zombie")
	reg, err := registry.NewDir(dir)
	require.NoError(t, err)
	tr, err := newUCXTransport(Config{Registry: reg, KeepAlive: time.Hour, Lane: LaneUCX})
	require.NoError(t, err)
	defer tr.Close()
	c, err := (&Dialer{Transport: tr, Timeout: 10 * time.Second}).Dial(Network, "zombie")
	require.NoError(t, err)
	defer c.Close()
	roundTrip(t, c, "alive")
	tl := c.(*testConn).Transports()
	t.Logf("transports %v", tl)
	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		readErr <- err
	}()
	time.Sleep(50 * time.Millisecond) // the Read is blocked
	killed := time.Now()
	require.NoError(t, child.Process.Signal(syscall.SIGKILL)) // not reaped until the test's cleanup
	select {
	case err := <-readErr:
		took := time.Since(killed)
		require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
		var op *net.OpError
		require.ErrorAs(t, err, &op)
		t.Logf("blocked Read failed %v after SIGKILL (peer unreaped): %v", took, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a Read blocked on a killed, unreaped peer did not fail within 10 s")
	}
	if usesShm(tl) {
		// Over tcp UCX may see the socket close first.
		require.Positive(t, tr.Stats().PeersExited, "the kernel channel did not tell")
	}
}

// A same-host peer that a trusted channel does not vouch for shared
// memory (here: another UCX release) gets none, and a dial's Lane says
// why.
func TestKChanReleaseMismatchReason(t *testing.T) {
	needSm(t)
	tr, err := newUCXTransport(Config{Registry: registry.NewMemory()})
	require.NoError(t, err)
	defer tr.Close()
	addr := tr.eng.Address() // offers shared memory
	other := &kchan.Chan{Hello: kchan.Hello{Release: "1.18.1", IPCNS: kchan.IPCNamespace()}, Cred: kchan.Cred{UID: uint32(os.Geteuid()), PID: 1}}
	tr.kc.mu.Lock()
	tr.kc.self.Release = "1.13.1"
	tr.kc.mu.Unlock()
	ok, why := tr.kc.vouch(other)
	require.False(t, ok)
	tr.kc.mu.Lock()
	tr.kc.byAddr[string(addr)] = &link{shm: ok, why: why}
	tr.kc.mu.Unlock()
	require.Equal(t, "no shared memory: UCX 1.13.1 here, 1.18.1 there", tr.kc.shmWhyNot(addr))
	stripped, err := tr.kc.ucxAddr(addr)
	if err != nil { // only shared memory (UCX_TLS=sm): refused
		require.ErrorContains(t, err, "shared memory")
		return
	}
	require.NotEqual(t, addr, stripped, "an unvouched peer's address reaches UCX without its shared memory")
}
