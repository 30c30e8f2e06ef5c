//go:build linux

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseProcNetTCPListen(t *testing.T) {
	// Taken from /proc/net/tcp and tcp6 (little-endian host), plus lines
	// a hostile or future kernel might give.
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 0202000A:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F91 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1
   4: zz:zz 00000000:0000 0A 0 0 0 0 0 333
   5: 0100007F 00000000:0000 0A 0 0 0 0 0 333
   6: 0100007F:FFFFF 00000000:0000 0A 0 0 0 0 0 333
   7: 01:0016 00000000:0000 0A 0 0 0 0 0 333
   8: 0100007F:0016 0A
   9: 0100007F:0017 00000000:0000 0A 0 0 0 0 0 notanumber

`
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0000000000000000 100 0 0 10 0
`
	// Garbage never panics.
	for _, b := range []string{"", "\n\n", "x\n0: : : 0A : : : : : 1", "h\n" + strings.Repeat("0A ", 100)} {
		_ = parseProcNetTCPListen([]byte(b), map[uint64]bool{1: true})
	}
	if !littleEndian() {
		t.Skip("skipped: the sample lines are from a little-endian host; this one is big-endian")
	}
	inodes := map[uint64]bool{111: true, 222: true, 333: true, 444: true, 555: true}
	got := parseProcNetTCPListen([]byte(tcp), inodes)
	want := []string{"127.0.0.1:8080", "10.0.2.2:22"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tcp: got %q, want %q", got, want)
	}
	got = parseProcNetTCPListen([]byte(tcp6), inodes)
	want = []string{"[::1]:8080", "[::]:80"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tcp6: got %q, want %q", got, want)
	}
}

func littleEndian() bool {
	switch runtime.GOARCH {
	case "amd64", "386", "arm64", "arm", "riscv64", "loong64", "ppc64le", "mips64le", "mipsle", "wasm":
		return true
	}
	return false
}

// listeningTCP finds a listener Go opened, and forgets it once closed.
func TestListeningTCPOwnSockets(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := listeningTCP(); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("listeningTCP on %s: %v, want an error saying unknown", runtime.GOOS, err)
		}
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	got, err := listeningTCP()
	if err != nil {
		t.Fatal(err)
	}
	if !contains(got, addr) {
		t.Errorf("listeningTCP = %q, lacks %s", got, addr)
	}
	// A connected socket is not a listener.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, _ = listeningTCP()
	if contains(got, c.LocalAddr().String()) {
		t.Errorf("listeningTCP lists the dialing socket %s: %q", c.LocalAddr(), got)
	}
	ln.Close()
	got, _ = listeningTCP()
	if contains(got, addr) {
		t.Errorf("after Close, listeningTCP = %q still has %s", got, addr)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// info lists the TCP addresses UCX's tcp transport opened, and
// --net-devices lo keeps them on the loopback interface.
func TestInfoListening(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipped: listing listening sockets needs Linux /proc")
	}
	reg := t.TempDir()
	for _, tc := range []struct {
		args     []string
		loopOnly bool
	}{{[]string{"info"}, false}, {[]string{"info", "--net-devices", "lo"}, true}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := binCommand(ctx, t, reg, tc.args...)
		cmd.Env = append(cmd.Env, "UCX_TLS=tcp")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.args, err, out)
		}
		_, section, ok := strings.Cut(string(out), "TCP addresses this process listens on")
		if !ok {
			t.Fatalf("%q: no listening section:\n%s", tc.args, out)
		}
		var addrs []string
		for _, line := range strings.Split(section, "\n")[1:] {
			f := strings.TrimSpace(line)
			if f == "" || strings.HasPrefix(f, "(") {
				break
			}
			addrs = append(addrs, f)
		}
		if len(addrs) == 0 {
			t.Fatalf("%q with UCX_TLS=tcp lists no TCP address:\n%s", tc.args, out)
		}
		for _, a := range addrs {
			host, _, err := net.SplitHostPort(a)
			if err != nil {
				t.Errorf("%q: bad address %q", tc.args, a)
				continue
			}
			if ip := net.ParseIP(host); tc.loopOnly && (ip == nil || !ip.IsLoopback()) {
				t.Errorf("%q: UCX listens on %s although NET_DEVICES=lo:\n%s", tc.args, a, out)
			}
		}
		if tc.loopOnly && !strings.Contains(string(out), "NET_DEVICES=lo") {
			t.Errorf("%q: the output does not say NET_DEVICES=lo:\n%s", tc.args, out)
		}
	}
}

// With --max-conns 2, a third concurrent conn is closed at once and
// counted; once one of the two ends, conns are served again.
func TestProxyMaxConns(t *testing.T) {
	backend := tcpBackend(t, func(c net.Conn) {
		defer c.Close()
		io.Copy(c, c) // echo until the client closes
	})
	p := startProxy(t, t.TempDir(), "tcp:127.0.0.1:0", "tcp:"+backend, "--max-conns", "2", "-v")

	echo := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(20 * time.Second)) // a hang guard, not a timing check
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		b := make([]byte, 1)
		_, err := io.ReadFull(c, b)
		return err
	}
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := echo(c); err != nil {
			t.Fatalf("conn %d within the bound: %v\nstderr:\n%s", i, err, p.stderr.String())
		}
		held = append(held, c)
	}
	// Over the bound: closed at once (EOF or reset), whatever we send.
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			continue // refused outright is fine too
		}
		err = echo(c)
		c.Close()
		if err == nil {
			t.Fatalf("conn over --max-conns 2 was served\nstderr:\n%s", p.stderr.String())
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Errorf("conn over the bound: %v, want EOF or a reset", err)
		}
	}
	// The proxy logs the refusal as it closes the conn: the line can come
	// after the client saw the close.
	for end := time.Now().Add(10 * time.Second); !strings.Contains(p.stderr.String(), "refused conn from tcp:127.0.0.1:"); {
		if time.Now().After(end) {
			t.Errorf("the refusal is not logged:\n%s", p.stderr.String())
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Free a slot; wait for the proxy to report that conn closed, then a
	// new conn is served.
	held[0].Close()
	waitLog(t, p, "closed:", 20*time.Second)
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echo(c); err != nil {
		t.Errorf("conn after a slot freed: %v\nstderr:\n%s", err, p.stderr.String())
	}
	held[1].Close()
	c.Close()
	p.stop(t)
	if !strings.Contains(p.stderr.String(), "3 refused over --max-conns 2") {
		t.Errorf("shutdown does not count 3 refusals:\n%s", p.stderr.String())
	}

	// A negative bound is a usage error.
	cmd := binCommand(context.Background(), t, t.TempDir(), "proxy", "--listen", "tcp:127.0.0.1:0", "--to", "tcp:"+backend, "--max-conns", "-1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("--max-conns -1: %v\n%s", err, out)
	}
}

// waitLog waits until p's stderr has s, failing t after d (a hang guard).
func waitLog(t *testing.T, p *proxyProc, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("proxy never logged %q:\n%s", s, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
