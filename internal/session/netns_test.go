package session

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Network namespace tests: an echo server (TestHelperProcess) in one
// namespace and a client (TestNetnsClientHelper) in another, joined by a
// veth pair, over UCX's tcp transport. Everything they configure lives
// inside the two namespaces; the host's interfaces are never touched.
//
// Needs root and iproute2 (`ip`); the loss case needs nftables (`nft`).

const (
	netnsClientEnv = "UCXNET_NETNS_CLIENT" // the name to dial
	netnsModeEnv   = "UCXNET_NETNS_MODE"   // "transfer" or "linkdown"
	netnsSizeEnv   = "UCXNET_NETNS_SIZE"   // bytes to echo in "transfer"
)

// netnsStreamSeed seeds the stream the client sends and verifies.
var netnsStreamSeed = [32]byte{'u', 'c', 'x', 'n', 'e', 't'}

// TestNetnsClientHelper is not a test: it is the client half of the
// namespace tests, run in a child process inside a namespace. It reports on
// stdout, one line per event, and exits.
func TestNetnsClientHelper(t *testing.T) {
	name := os.Getenv(netnsClientEnv)
	if name == "" {
		t.Skip("helper process for TestNetns; runs only as its child")
	}
	fail := func(format string, args ...any) {
		fmt.Printf("fail "+format+"\n", args...)
		os.Exit(1)
	}
	tr, err := DefaultTransport()
	if err != nil {
		fail("transport: %v", err)
	}
	d := Dialer{Transport: tr, Timeout: 10 * time.Second}
	switch os.Getenv(netnsModeEnv) {
	case "transfer":
		size, _ := strconv.Atoi(os.Getenv(netnsSizeEnv))
		start := time.Now()
		if err := netnsEcho(&d, name, int64(size)); err != nil {
			fail("%v", err)
		}
		fmt.Printf("ok %d bytes echoed in %v\n", size, time.Since(start).Round(time.Millisecond))
		os.Exit(0)
	case "linkdown":
		c, err := d.Dial(Network, name)
		if err != nil {
			fail("dial: %v", err)
		}
		// Echo an endless stream; say "flowing" once data comes back, then
		// report the first I/O error with the time it happened.
		errc := make(chan error, 2)
		go func() {
			gen := rand.NewChaCha8(netnsStreamSeed)
			buf := make([]byte, 256<<10)
			for {
				gen.Read(buf)
				if _, err := c.Write(buf); err != nil {
					errc <- fmt.Errorf("write: %w", err)
					return
				}
			}
		}()
		go func() {
			gen := rand.NewChaCha8(netnsStreamSeed)
			buf := make([]byte, 64<<10)
			want := make([]byte, len(buf))
			var total int64
			said := false
			for {
				n, err := c.Read(buf)
				gen.Read(want[:n])
				if !bytes.Equal(buf[:n], want[:n]) {
					errc <- fmt.Errorf("CORRUPT: echoed stream differs near offset %d", total)
					return
				}
				total += int64(n)
				if !said && total >= 4<<20 {
					fmt.Println("flowing")
					said = true
				}
				if err != nil {
					errc <- fmt.Errorf("read after %d bytes: %w", total, err)
					return
				}
			}
		}()
		err = <-errc
		fmt.Printf("ioerror %d %v\n", time.Now().UnixNano(), err)
		c.Close()
		// Wait for the parent to bring the link back, then a new conn must work.
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			fail("stdin: %v", err)
		}
		start := time.Now()
		d.Timeout = 4 * time.Second
		var err2 error
		for try := range 4 {
			if err2 = netnsEcho(&d, name, 1<<20); err2 == nil {
				break
			}
			fmt.Printf("retry %d after %v: %v (peers %d)\n", try, time.Since(start), err2, tr.Stats().Peers)
		}
		if err2 != nil {
			fail("new conn after link up: %v", err2)
		}
		fmt.Printf("ok new conn after link up echoed 1 MiB in %v\n", time.Since(start).Round(time.Millisecond))
		os.Exit(0)
	}
	fail("unknown mode %q", os.Getenv(netnsModeEnv))
}

// netnsEcho dials name, sends size bytes of the seeded stream while reading
// the echo, and verifies it.
func netnsEcho(d *Dialer, name string, size int64) error {
	c, err := d.Dial(Network, name)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	werr := make(chan error, 1)
	go func() {
		gen := rand.NewChaCha8(netnsStreamSeed)
		buf := make([]byte, 1<<20)
		for left := size; left > 0; {
			n := min(left, int64(len(buf)))
			gen.Read(buf[:n])
			if _, err := c.Write(buf[:n]); err != nil {
				werr <- fmt.Errorf("write: %w", err)
				return
			}
			left -= n
		}
		werr <- c.(*testConn).CloseWrite()
	}()
	gen := rand.NewChaCha8(netnsStreamSeed)
	buf := make([]byte, 256<<10)
	want := make([]byte, len(buf))
	var total int64
	for {
		n, err := c.Read(buf)
		gen.Read(want[:n])
		if !bytes.Equal(buf[:n], want[:n]) {
			return fmt.Errorf("CORRUPT: echoed stream differs near offset %d", total)
		}
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read after %d of %d bytes: %w", total, size, err)
		}
	}
	if total != size {
		return fmt.Errorf("echoed %d bytes, sent %d", total, size)
	}
	return <-werr
}

// netnsChild is a child process running in a namespace.
type netnsChild struct {
	cmd   *exec.Cmd
	lines chan string // its stdout, line by line; closed at EOF
	stdin io.WriteCloser
}

// expect waits for a line starting with prefix; any other line (a "fail")
// ends the test.
func (c *netnsChild) expect(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited while waiting for %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
			if strings.HasPrefix(line, "fail") {
				t.Fatalf("child: %s", line)
			}
			t.Logf("child: %s", line)
		case <-timer.C:
			t.Fatalf("no %q from the child within %v", prefix, timeout)
		}
	}
}

type netnsEnv struct {
	nsS, nsC     string // server and client namespaces
	vethS, vethC string
	regDir       string
}

// run runs a command, failing the test with its output on error.
func netnsRun(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
}

// start runs the test binary in namespace ns with the given test and env.
func (e *netnsEnv) start(t *testing.T, ns, veth, run string, env ...string) *netnsChild {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^"+run+"$", "-test.v=false")
	cmd.Env = append(os.Environ(),
		"UCX_TLS=tcp", "UCX_NET_DEVICES="+veth,
		// Detect a dead link while idle within a few seconds (socket
		// keepalive) as well as while sending (tcp_retries2, set per
		// namespace in TestNetns).
		"UCX_TCP_KEEPIDLE=1s", "UCX_TCP_KEEPINTVL=1s", "UCX_TCP_KEEPCNT=3",
		"UCXNET_REGISTRY=dir:"+e.regDir, "GORACE=atexit_sleep_ms=0", "UCXNET_KEEPALIVE=1s")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	c := &netnsChild{cmd: cmd, lines: make(chan string, 16), stdin: stdin}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range c.lines { // drain so the scanner goroutine ends
		}
		wg.Wait()
		cmd.Wait()
	})
	return c
}

// setupNetns creates the two namespaces and the veth pair, or skips.
func setupNetns(t *testing.T) *netnsEnv {
	if os.Geteuid() != 0 {
		t.Skip("network namespace tests need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network namespace tests need iproute2's ip: ", err, " (make deps should install iproute2 nftables)")
	}
	pid := os.Getpid()
	e := &netnsEnv{
		nsS: fmt.Sprintf("ucxnet-s-%d", pid), nsC: fmt.Sprintf("ucxnet-c-%d", pid),
		vethS: fmt.Sprintf("uxs%d", pid), vethC: fmt.Sprintf("uxc%d", pid),
		regDir: t.TempDir(),
	}
	if out, err := exec.Command("ip", "netns", "add", e.nsS).CombinedOutput(); err != nil {
		t.Skipf("ip netns add failed (no CAP_SYS_ADMIN or no netns support?): %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", e.nsS).Run() })
	netnsRun(t, "ip", "netns", "add", e.nsC)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", e.nsC).Run() })
	// Both ends are created directly inside their namespaces (deleting the
	// namespaces deletes them).
	netnsRun(t, "ip", "link", "add", e.vethS, "netns", e.nsS, "type", "veth", "peer", "name", e.vethC, "netns", e.nsC)
	subnet := fmt.Sprintf("10.213.%d", rand.IntN(256))
	for _, side := range []struct{ ns, veth, addr string }{{e.nsS, e.vethS, subnet + ".1/24"}, {e.nsC, e.vethC, subnet + ".2/24"}} {
		netnsRun(t, "ip", "-n", side.ns, "addr", "add", side.addr, "dev", side.veth)
		netnsRun(t, "ip", "-n", side.ns, "link", "set", "lo", "up")
		netnsRun(t, "ip", "-n", side.ns, "link", "set", side.veth, "up")
		// A send to a dead link fails after ~3 s of retransmissions rather
		// than the default ~15 min (tcp_retries2 is per namespace).
		netnsRun(t, "ip", "netns", "exec", side.ns, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2=4")
	}
	// The veth carrier comes up asynchronously; UCX ignores a device
	// without it ("network device ... is not available").
	for _, side := range []struct{ ns, veth string }{{e.nsS, e.vethS}, {e.nsC, e.vethC}} {
		netnsWaitCarrier(t, side.ns, side.veth, true)
	}
	t.Logf("namespaces %s (%s, %s.1) and %s (%s, %s.2)", e.nsS, e.vethS, subnet, e.nsC, e.vethC, subnet)
	return e
}

// netnsWaitCarrier waits until veth in ns has (or, with want false, has
// lost) its carrier.
func netnsWaitCarrier(t *testing.T, ns, veth string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "dev", veth).CombinedOutput()
		require.NoError(t, err, "%s", out)
		has := strings.Contains(string(out), "LOWER_UP") && !strings.Contains(string(out), "NO-CARRIER")
		if has == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s: carrier %v not reached in 10 s: %s", veth, ns, want, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNetns(t *testing.T) {
	e := setupNetns(t)
	srv := e.start(t, e.nsS, e.vethS, "TestHelperProcess", childEnv+"=echo")
	srv.expect(t, "ready", 10*time.Second)

	transfer := func(t *testing.T, size int) {
		cli := e.start(t, e.nsC, e.vethC, "TestNetnsClientHelper",
			netnsClientEnv+"=echo", netnsModeEnv+"=transfer", netnsSizeEnv+"="+strconv.Itoa(size))
		t.Log(cli.expect(t, "ok", 30*time.Second))
	}

	t.Run("Transfer", func(t *testing.T) { transfer(t, 32<<20) })

	t.Run("Loss", func(t *testing.T) {
		if _, err := exec.LookPath("nft"); err != nil {
			t.Skip("nft not found, skipping the 1% loss case (make deps should install iproute2 nftables): ", err)
		}
		nft := func(args ...string) {
			netnsRun(t, append([]string{"ip", "netns", "exec", e.nsS, "nft"}, args...)...)
		}
		nft("add", "table", "inet", "ucxnet_loss")
		t.Cleanup(func() {
			exec.Command("ip", "netns", "exec", e.nsS, "nft", "delete", "table", "inet", "ucxnet_loss").Run()
		})
		nft("add chain inet ucxnet_loss in { type filter hook input priority 0; }")
		nft("add", "rule", "inet", "ucxnet_loss", "in", "numgen", "random", "mod", "100", "<", "1", "drop")
		transfer(t, 8<<20)
	})

	t.Run("LinkDown", func(t *testing.T) {
		cli := e.start(t, e.nsC, e.vethC, "TestNetnsClientHelper", netnsClientEnv+"=echo", netnsModeEnv+"=linkdown")
		cli.expect(t, "flowing", 20*time.Second)
		netnsRun(t, "ip", "-n", e.nsS, "link", "set", e.vethS, "down")
		down := time.Now()
		up := false
		t.Cleanup(func() {
			if !up {
				exec.Command("ip", "-n", e.nsS, "link", "set", e.vethS, "up").Run()
			}
		})
		line := cli.expect(t, "ioerror", 30*time.Second)
		var at int64
		var why string
		_, err := fmt.Sscanf(line, "ioerror %d", &at)
		require.NoError(t, err)
		if f := strings.SplitN(line, " ", 3); len(f) == 3 {
			why = f[2]
		}
		detected := time.Unix(0, at).Sub(down)
		t.Logf("link down detected by the client's I/O after %v: %s", detected.Round(time.Millisecond), why)
		require.NotContains(t, why, "CORRUPT")
		require.Contains(t, why, "connection reset", "I/O failed, but not with ECONNRESET")

		netnsRun(t, "ip", "-n", e.nsS, "link", "set", e.vethS, "up")
		up = true
		netnsWaitCarrier(t, e.nsS, e.vethS, true)
		netnsWaitCarrier(t, e.nsC, e.vethC, true)
		_, err = io.WriteString(cli.stdin, "up\n")
		require.NoError(t, err)
		t.Log(cli.expect(t, "ok", 30*time.Second))
	})
}
