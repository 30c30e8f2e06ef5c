package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proxyProc is a running "ucxnet proxy".
type proxyProc struct {
	bgProc
	addr    string // the bound address from the "listening" line, without the network
	listen  string
	stopped bool
}

// stop sends SIGTERM and expects exit status 0 within 10s.
func (p *proxyProc) stop(t *testing.T) {
	t.Helper()
	p.stopped = true
	select {
	case <-p.done:
		t.Errorf("proxy %s exited early: %v\nstderr:\n%s", p.listen, p.err, p.stderr.String())
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("proxy %s after SIGTERM: %v (want exit 0)\nstderr:\n%s", p.listen, p.err, p.stderr.String())
		}
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("proxy %s: still running 10s after SIGTERM\nstderr:\n%s", p.listen, p.stderr.String())
	}
}

// startProxy starts "ucxnet proxy --listen listen --to to [extra...]" with the
// registry reg, waits for its "listening" line and stops it with SIGTERM
// at cleanup, expecting exit status 0.
func startProxy(t *testing.T, reg, listen, to string, extra ...string) *proxyProc {
	t.Helper()
	p := &proxyProc{bgProc: bgProc{done: make(chan struct{})}, listen: listen}
	args := append([]string{"proxy", "--listen", listen, "--to", to, "--grace", "1s"}, extra...)
	p.cmd = binCommand(context.Background(), t, reg, args...)
	pr, pw := io.Pipe()
	p.cmd.Stdout = io.MultiWriter(&p.stdout, pw)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.stopped {
			p.stop(t)
		}
		if testing.Verbose() {
			t.Logf("proxy --listen %s stderr:\n%s", listen, p.stderr.String())
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		found := false
		for sc.Scan() {
			// "listening tcp:127.0.0.1:34567 -> ucx:web"
			if f := strings.Fields(sc.Text()); !found && len(f) >= 2 && f[0] == "listening" {
				found = true
				_, a, _ := strings.Cut(f[1], ":")
				addr <- a
			}
		}
		if !found {
			addr <- ""
		}
	}()
	select {
	case a := <-addr:
		if a == "" {
			<-p.done
			t.Fatalf("proxy %s exited without listening: %v\nstderr:\n%s", listen, p.err, p.stderr.String())
		}
		p.addr = a
	case <-time.After(20 * time.Second):
		t.Fatalf("proxy %s: not listening after 20s\nstderr:\n%s", listen, p.stderr.String())
	}
	return p
}

// startProxyPair bridges a TCP listener to the TCP server backend through
// ucxnet: TCP client → proxy A → ucx:name → proxy B → backend. It returns
// proxy A's TCP address and the two proxies.
func startProxyPair(t *testing.T, backend string) (string, *proxyProc, *proxyProc) {
	t.Helper()
	reg := t.TempDir()
	name := "proxy-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	b := startProxy(t, reg, "ucx:"+name, "tcp:"+backend, "-v")
	a := startProxy(t, reg, "tcp:127.0.0.1:0", "ucx:"+name, "-v")
	return a.addr, a, b
}

func TestProxyUsage(t *testing.T) {
	reg := t.TempDir()
	for _, args := range [][]string{
		{"proxy"},
		{"proxy", "--listen", "tcp:127.0.0.1:0"},
		{"proxy", "--listen", "udp:x:1", "--to", "ucx:x"},
		{"proxy", "--listen", "tcp:127.0.0.1:0", "--to", "tcp:nope"},
	} {
		if r := runBin(t, reg, nil, 10*time.Second, args...); r.code != 2 || !strings.Contains(r.stderr, "Usage: ucxnet proxy") {
			t.Errorf("ucxnet %q: exit %d (want 2), stderr:\n%s", args, r.code, r.stderr)
		}
	}
}

// TestProxyHTTP runs curl against a Go HTTP server through the pair.
func TestProxyHTTP(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not on PATH (make deps installs it):", err)
	}
	big := randomBytes(t, 8<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello through ucxnet\n") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		w.Write(big)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(body)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	addr, a, b := startProxyPair(t, ln.Addr().String())
	dir := t.TempDir()
	fetch := func(args ...string) []byte {
		t.Helper()
		out := filepath.Join(dir, "out")
		args = append([]string{"-sS", "--fail", "--max-time", "10", "-o", out}, args...)
		cmd := exec.Command(curl, args...)
		start := time.Now()
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("curl %s: %v\n%s\nproxy A stderr:\n%s\nproxy B stderr:\n%s", strings.Join(args, " "), err, msg, a.stderr.String(), b.stderr.String())
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("curl %s: %d bytes in %v", strings.Join(args[6:], " "), len(got), time.Since(start).Round(time.Millisecond))
		return got
	}

	if got := fetch("http://" + addr + "/small"); string(got) != "hello through ucxnet\n" {
		t.Errorf("/small: got %q", got)
	}
	if got, want := sha256.Sum256(fetch("http://"+addr+"/big")), sha256.Sum256(big); got != want {
		t.Errorf("/big: sha256 %x, want %x", got[:8], want[:8])
	}
	post := big[:4<<20]
	postFile := filepath.Join(dir, "post")
	if err := os.WriteFile(postFile, post, 0o600); err != nil {
		t.Fatal(err)
	}
	got := fetch("--data-binary", "@"+postFile, "-H", "Content-Type: application/octet-stream", "http://"+addr+"/echo")
	if g, w := sha256.Sum256(got), sha256.Sum256(post); len(got) != len(post) || g != w {
		t.Errorf("/echo: got %d bytes sha256 %x, want %d bytes sha256 %x", len(got), g[:8], len(post), w[:8])
	}
	for _, p := range []*proxyProc{a, b} {
		if s := p.stderr.String(); !strings.Contains(s, "conn 1: open") || !strings.Contains(s, "bytes in") {
			t.Errorf("proxy does not report its conns:\n%s", s)
		}
	}
}

// TestProxyHalfClose: the client's CloseWrite reaches the backend as EOF,
// and the backend's reply and close come back.
func TestProxyHalfClose(t *testing.T) {
	backend := tcpBackend(t, func(c net.Conn) {
		defer c.Close()
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			fmt.Fprintf(c, "error %v\n", err)
			return
		}
		fmt.Fprintf(c, "got %d bytes\n", n)
	})
	addr, a, b := startProxyPair(t, backend)

	for _, size := range []int{0, 1 << 20} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(15 * time.Second))
		if _, err := c.Write(randomBytes(t, size)); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		reply, err := io.ReadAll(c) // the reply, then EOF
		c.Close()
		if want := fmt.Sprintf("got %d bytes\n", size); err != nil || string(reply) != want {
			t.Fatalf("size %d: reply %q, %v; want %q then EOF\nproxy A stderr:\n%s\nproxy B stderr:\n%s", size, reply, err, want, a.stderr.String(), b.stderr.String())
		}
	}
}

// TestProxyReset: a backend that resets its conn mid-stream makes the
// client's conn fail promptly instead of hanging.
func TestProxyReset(t *testing.T) {
	backend := tcpBackend(t, func(c net.Conn) {
		io.ReadFull(c, make([]byte, 1000))
		c.(*net.TCPConn).SetLinger(0)
		c.Close() // RST
	})
	addr, a, b := startProxyPair(t, backend)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	done := make(chan error, 1)
	go func() { // keep writing until the conn fails
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	_, rerr := io.Copy(io.Discard, c) // EOF or reset
	c.Close()
	werr := <-done
	var ne net.Error
	if errors.As(rerr, &ne) && ne.Timeout() || errors.As(werr, &ne) && ne.Timeout() {
		t.Fatalf("conn through the proxy not closed after the backend's reset: read %v, write %v\nproxy A stderr:\n%s\nproxy B stderr:\n%s", rerr, werr, a.stderr.String(), b.stderr.String())
	}
	t.Logf("client saw: read %v; write %v", rerr, werr)
}

// TestProxyShutdown: SIGTERM with a conn open: the proxy closes it after
// --grace (1s) and exits 0; the client sees its conn end.
func TestProxyShutdown(t *testing.T) {
	backend := tcpBackend(t, func(c net.Conn) { io.Copy(c, c); c.Close() }) // echo
	addr, a, _ := startProxyPair(t, backend)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	buf := make([]byte, 5)
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
	start := time.Now()
	a.stop(t) // idle conn open: waits out --grace, then closes it
	// stop fails the test if the proxy is still up 10 s after SIGTERM.
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("proxy exited %v after SIGTERM; want it to wait out --grace (1s) for the open conn", el)
	}
	if n, err := c.Read(buf); err == nil {
		t.Errorf("client conn still open after the proxy exited: read %q", buf[:n])
	} else {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("client conn not closed by the proxy's exit: %v", err)
		}
	}
	if s := a.stderr.String(); !strings.Contains(s, "grace period over: closed 1 conns") {
		t.Errorf("proxy did not report closing the open conn:\n%s", s)
	}
}

// TestProxyRedis runs redis-benchmark against redis-server through the pair.
func TestProxyRedis(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH (make deps installs it):", err)
	}
	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Skip("redis-benchmark is not on PATH (make deps installs it):", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := exec.Command(server, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no")
	srv.Dir = t.TempDir()
	var srvOut lockedBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	srvDone := make(chan struct{})
	go func() { srv.Wait(); close(srvDone) }()
	t.Cleanup(func() { srv.Process.Kill(); <-srvDone })
	backend := "127.0.0.1:" + port
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", backend)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server not accepting on %s: %v\n%s", backend, err, srvOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	addr, a, b := startProxyPair(t, backend)
	host, aport, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bench, "-h", host, "-p", aport, "-n", "2000", "-c", "10", "-t", "set,get", "-q")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s\nproxy A stderr:\n%s\nproxy B stderr:\n%s", err, out, a.stderr.String(), b.stderr.String())
	}
	var rates []string
	for _, line := range strings.FieldsFunc(string(out), func(r rune) bool { return r == '\r' || r == '\n' }) {
		if strings.Contains(line, "requests per second") {
			rates = append(rates, strings.TrimSpace(line))
		}
	}
	if len(rates) != 2 || !strings.HasPrefix(rates[0], "SET: ") || !strings.HasPrefix(rates[1], "GET: ") {
		t.Fatalf("redis-benchmark printed no SET and GET rates:\n%q", out)
	}
	for _, r := range rates {
		t.Log("redis-benchmark through ucxnet proxy:", r)
	}
}

// tcpBackend starts a TCP server on a free loopback port that runs serve
// for each conn (in its own goroutine), and returns its address.
func tcpBackend(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// TestProxyLogsConnsOnlyVerbose: a conn opened and closed cleanly is a
// line on stderr with -v only; the proxy's start is there either way.
func TestProxyLogsConnsOnlyVerbose(t *testing.T) {
	backend := tcpBackend(t, func(c net.Conn) { io.Copy(c, c); c.Close() }) // echo
	for _, verbose := range []bool{false, true} {
		var extra []string
		if verbose {
			extra = append(extra, "-v")
		}
		p := startProxy(t, t.TempDir(), "tcp:127.0.0.1:0", "tcp:"+backend, extra...)
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "ping")
		c.(*net.TCPConn).CloseWrite()
		if got, err := io.ReadAll(c); err != nil || string(got) != "ping" {
			t.Fatalf("echo through the proxy: %q, %v", got, err)
		}
		c.Close()
		if verbose { // the close line comes after the client's EOF: wait for it
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && !strings.Contains(p.stderr.String(), "conn 1: closed"); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		p.stop(t)
		s := p.stderr.String()
		if logged := strings.Contains(s, "conn 1: open") && strings.Contains(s, "conn 1: closed"); logged != verbose {
			t.Errorf("-v %v: conn 1 logged %v, want %v; stderr:\n%s", verbose, logged, verbose, s)
		}
		if !verbose && strings.Contains(s, "conn 1") {
			t.Errorf("without -v, a clean conn is logged:\n%s", s)
		}
	}
}

// TestProxyIdleTimeout: idle clients take every --max-conns slot. With
// --idle-timeout they are reset once idle that long, and a new client is
// served; a conn that keeps talking is not touched.
func TestProxyIdleTimeout(t *testing.T) {
	backend := tcpBackend(t, func(c net.Conn) { io.Copy(c, c); c.Close() }) // echo
	p := startProxy(t, t.TempDir(), "tcp:127.0.0.1:0", "tcp:"+backend,
		"--max-conns", "2", "--idle-timeout", "2s")
	echo := func(c net.Conn, msg string) error {
		if _, err := io.WriteString(c, msg); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != msg {
			return fmt.Errorf("echo %q, want %q", buf, msg)
		}
		return nil
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	// One idle client and one busy one hold both slots.
	idle, busy := dial(), dial()
	if err := echo(idle, "hi\n"); err != nil {
		t.Fatalf("idle client: %v", err)
	}
	stopBusy := make(chan struct{})
	busyErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopBusy:
				busyErr <- nil
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := echo(busy, fmt.Sprintf("ping %d\n", i)); err != nil {
				busyErr <- err
				return
			}
		}
	}()
	// The idle one is reset (not left open, not timed out by the client).
	n, err := idle.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("idle conn not closed by --idle-timeout 2s: read %d, %v\nstderr:\n%s", n, err, p.stderr.String())
	}
	// Its slot is freed (just after the reset: a client dialing at once
	// may still be refused): a new client is served.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", p.addr)
		if err == nil {
			c.SetDeadline(time.Now().Add(30 * time.Second))
			err = echo(c, "new\n")
			c.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new client served within 30 s of the idle one's reset: %v\nstderr:\n%s", err, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stopBusy)
	if err := <-busyErr; err != nil {
		t.Fatalf("a busy conn was disturbed: %v\nstderr:\n%s", err, p.stderr.String())
	}
	// The proxy logs the reset after closing the conn: the log line may
	// trail the client's read.
	logged := func() bool { return strings.Contains(p.stderr.String(), "idle for --idle-timeout") }
	for end := time.Now().Add(10 * time.Second); !logged() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if !logged() {
		t.Errorf("the proxy did not log the idle reset:\n%s", p.stderr.String())
	}
	r := runBin(t, t.TempDir(), nil, 10*time.Second, "proxy", "--listen", "tcp:127.0.0.1:0", "--to", "tcp:"+backend, "--idle-timeout", "-1s")
	if r.code != 2 || !strings.Contains(r.stderr, "--idle-timeout") {
		t.Errorf("--idle-timeout -1s: exit %d (want 2)\n%s", r.code, r.stderr)
	}
}
