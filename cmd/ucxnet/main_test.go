package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// bin is the ucxnet binary built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ucxnet-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The tests' stats sockets (their children's too) go to this run's
	// directory, not the user's, unless UCXNET_STATS_DIR says otherwise.
	if os.Getenv(ucxnet.EnvStatsDir) == "" {
		stats := filepath.Join(dir, "stats")
		if err := os.Mkdir(stats, 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Setenv(ucxnet.EnvStatsDir, stats)
	}
	bin = filepath.Join(dir, "ucxnet")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ucxnet:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binCommand returns a command running the binary with a private registry.
func binCommand(ctx context.Context, t *testing.T, reg string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "UCXNET_REGISTRY=dir:"+reg)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

type result struct {
	stdout, stderr string
	code           int
}

// runBin runs the binary to completion with stdin and a timeout.
func runBin(t *testing.T, reg string, stdin io.Reader, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := binCommand(ctx, t, reg, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("ucxnet %s: %v\nstderr:\n%s", strings.Join(args, " "), err, r.stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("ucxnet %s: timed out after %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, r.stdout, r.stderr)
	}
	return r
}

func TestHelp(t *testing.T) {
	reg := t.TempDir()
	r := runBin(t, reg, nil, 10*time.Second, "help")
	if r.code != 0 {
		t.Fatalf("help: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, c := range []string{"demo", "info", "cat"} {
		if !strings.Contains(r.stdout, "\n  "+c) {
			t.Errorf("help does not list %q:\n%s", c, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "demo-server") {
		t.Errorf("help lists the hidden demo-server:\n%s", r.stdout)
	}
	for _, c := range []string{"demo", "info", "cat", "demo-server"} {
		r := runBin(t, reg, nil, 10*time.Second, c, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: ucxnet "+c) {
			t.Errorf("%s --help: exit %d, stdout:\n%s\nstderr:\n%s", c, r.code, r.stdout, r.stderr)
		}
	}
	if r := runBin(t, reg, nil, 10*time.Second, "help", "cat"); r.code != 0 || !strings.Contains(r.stdout, "-l") {
		t.Errorf("help cat: exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

// TestUsageErrors checks the exit status 2 of usage errors: an unknown
// command prints the command list; a bad flag or argument prints two
// lines, the error and the synopsis with where the usage is, not the
// whole usage.
func TestUsageErrors(t *testing.T) {
	reg := t.TempDir()
	for _, args := range [][]string{{"no-such-command"}, {}} {
		r := runBin(t, reg, nil, 10*time.Second, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "Commands:") {
			t.Errorf("ucxnet %q: exit %d (want 2), stderr:\n%s", args, r.code, r.stderr)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cat", "--no-such-flag", "x"}, "ucxnet: cat: flag provided but not defined: -no-such-flag\n"},
		{[]string{"cat", "--timeout", "soon", "x"}, "ucxnet: cat: invalid value \"soon\" for flag -timeout"},
		{[]string{"cat"}, "ucxnet: cat: want exactly one NAME, got 0 arguments\n"}, // NAME missing
		{[]string{"bench", "--bogus"}, "ucxnet: bench: flag provided but not defined: -bogus\n"},
	} {
		r := runBin(t, reg, nil, 10*time.Second, tc.args...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		hint := "Usage: ucxnet " + tc.args[0] + " [FLAGS]"
		if r.code != 2 || !strings.HasPrefix(r.stderr, tc.want) || len(lines) != 2 ||
			!strings.HasPrefix(lines[1], hint) || !strings.HasSuffix(lines[1], "(run 'ucxnet help "+tc.args[0]+"' for more)") {
			t.Errorf("ucxnet %q: exit %d (want 2), stderr (want %q, then %q... in 2 lines):\n%s", tc.args, r.code, tc.want, hint, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("ucxnet %q: stdout %q, want nothing", tc.args, r.stdout)
		}
	}
}

// TestVersion checks that --version and the version command print the
// module, Go and UCX versions.
func TestVersion(t *testing.T) {
	reg := t.TempDir()
	var first string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := runBin(t, reg, nil, 10*time.Second, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("ucxnet %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		lines := strings.Split(r.stdout, "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "ucxnet ") ||
			!strings.HasPrefix(lines[1], "built with "+runtime.Version()+" ") ||
			!strings.HasPrefix(lines[2], "UCX 1.") || !strings.Contains(lines[2], " loaded, built against 1.") {
			t.Errorf("ucxnet %q: stdout\n%s\nwant ucxnet's version, then Go's, then UCX's loaded and built-for releases", args, r.stdout)
		}
		if first == "" {
			first = r.stdout
		} else if r.stdout != first {
			t.Errorf("ucxnet version printed\n%s\nbut --version\n%s", r.stdout, first)
		}
	}
	if r := runBin(t, reg, nil, 10*time.Second, "version", "extra"); r.code != 2 {
		t.Errorf("ucxnet version extra: exit %d, want 2; stderr:\n%s", r.code, r.stderr)
	}
}

func TestInfo(t *testing.T) {
	reg := t.TempDir()
	r := runBin(t, reg, nil, 20*time.Second, "info")
	if r.code != 0 {
		t.Fatalf("info: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"UCX version 1.", "Transports and devices", "dir:" + reg,
		"kernel-TCP lane listens on: lo"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("info output lacks %q:\n%s", s, r.stdout)
		}
	}
	// A name that is not there: exit 1 with the error on stderr.
	r = runBin(t, reg, nil, 20*time.Second, "info", "nobody-here")
	if r.code != 1 || !strings.Contains(r.stderr, "ucxnet: info: ") || !strings.Contains(r.stdout, "does not resolve") {
		t.Errorf("info nobody-here: exit %d (want 1)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// bgProc is a background ucxnet process.
type bgProc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr lockedBuffer
	done   chan struct{}
	err    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startReady starts cmd, which must print a first line on stdout that
// starts with prefix, and returns that line (trimmed) and the command's
// stderr. The command is killed when the test ends.
func startReady(t *testing.T, cmd *exec.Cmd, prefix string) (string, *lockedBuffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, prefix) {
		t.Fatalf("%s said %q (%v), want %q...; stderr:\n%s", strings.Join(cmd.Args[1:], " "), line, err, prefix, stderr.String())
	}
	return strings.TrimSpace(line), stderr
}

// startListener starts "ucxnet cat -l name" with stdin and waits until it
// announces that it listens.
func startListener(ctx context.Context, t *testing.T, reg, name string, stdin io.Reader) *bgProc {
	t.Helper()
	p := &bgProc{done: make(chan struct{})}
	p.cmd = binCommand(ctx, t, reg, "cat", "-l", name)
	p.cmd.Stdin = stdin
	p.cmd.Stdout = &p.stdout
	pr, pw := io.Pipe()
	p.cmd.Stderr = io.MultiWriter(&p.stderr, pw)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), "listening as "+name) {
				ok = true
				listening <- true
			}
		}
		if !ok {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			<-p.done
			t.Fatalf("cat -l %s exited without listening: %v\nstderr:\n%s", name, p.err, p.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("cat -l %s: not listening after 20s\nstderr:\n%s", name, p.stderr.String())
	}
	return p
}

func (p *bgProc) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s: did not exit within %v\nstderr:\n%s", p.cmd.Args, timeout, p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", p.cmd.Args, p.err, p.stderr.String())
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCat pipes 1 MiB each way between "cat -l" and "cat" in two
// processes.
func TestCat(t *testing.T) {
	reg := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	up := randomBytes(t, 1<<20)   // dialer → listener
	down := randomBytes(t, 1<<20) // listener → dialer

	l := startListener(ctx, t, reg, "cat-test", bytes.NewReader(down))
	r := runBin(t, reg, bytes.NewReader(up), 30*time.Second, "cat", "cat-test")
	if r.code != 0 {
		t.Fatalf("cat cat-test: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	l.wait(t, 20*time.Second)

	if got, want := sha256.Sum256(l.stdout.Bytes()), sha256.Sum256(up); got != want {
		t.Errorf("listener received %d bytes, sha256 %x; dialer sent %d bytes, sha256 %x", l.stdout.Len(), got[:8], len(up), want[:8])
	}
	if got, want := sha256.Sum256([]byte(r.stdout)), sha256.Sum256(down); got != want {
		t.Errorf("dialer received %d bytes, sha256 %x; listener sent %d bytes, sha256 %x", len(r.stdout), got[:8], len(down), want[:8])
	}
	for _, s := range []string{l.stderr.String(), r.stderr} {
		if !strings.Contains(s, " via ") {
			t.Errorf("cat does not report its transports:\n%s", s)
		}
		// Two cats end on each other's acknowledgement (cat records),
		// not by waiting for the other to exit.
		if !strings.Contains(s, "the peer, a ucxnet cat, confirmed it has everything") || strings.Contains(s, "--linger") {
			t.Errorf("cat to cat did not end on the peer's acknowledgement:\n%s", s)
		}
	}
	// The listener accepted one conn and withdrew its name.
	if r := runBin(t, reg, nil, 20*time.Second, "cat", "cat-test"); r.code != 1 || !strings.Contains(r.stderr, "ucxnet: cat: ") {
		t.Errorf("cat to a finished listener: exit %d (want 1), stderr:\n%s", r.code, r.stderr)
	}
}

// TestCatPlainDialer dials "cat -l" from a program that is no ucxnet cat:
// the bytes go unframed both ways, and the listener ends by waiting for
// the peer to go (--linger), as netcat-like tools must.
func TestCatPlainDialer(t *testing.T) {
	reg := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	down := randomBytes(t, 100<<10)
	l := startListener(ctx, t, reg, "cat-plain", bytes.NewReader(down))

	r, err := registry.Open("dir:" + reg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ucxnet.NewTransport(ucxnet.Config{Registry: r})
	if err != nil {
		t.Fatal(err)
	}
	d := ucxnet.Dialer{Transport: tr, Timeout: 20 * time.Second}
	nc, err := d.DialContext(ctx, "ucx", "cat-plain")
	if err != nil {
		tr.Close()
		t.Fatal(err)
	}
	c := nc.(*ucxnet.Conn)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "hello, plain bytes"); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	got, err := io.ReadAll(c)
	c.Close()
	tr.Close() // the listener, lingering for us to go, may now exit
	if err != nil {
		t.Fatalf("reading from cat -l: %v", err)
	}
	l.wait(t, 20*time.Second)
	if !bytes.Equal(got, down) {
		t.Errorf("dialer received %d bytes, want the listener's %d bytes of stdin unframed", len(got), len(down))
	}
	if s := l.stdout.String(); s != "hello, plain bytes" {
		t.Errorf("listener wrote %q, want the dialer's bytes unframed", s)
	}
	if s := l.stderr.String(); !strings.Contains(s, "waiting up to --linger for the peer to go") {
		t.Errorf("cat -l with a plain peer did not wait for it to go:\n%s", s)
	}
}

// TestInfoName probes a live listener with "info NAME".
func TestInfoName(t *testing.T) {
	reg := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	l := startListener(ctx, t, reg, "info-test", nil) // empty stdin: finishes after one conn
	r := runBin(t, reg, nil, 20*time.Second, "info", "info-test")
	if r.code != 0 {
		t.Fatalf("info info-test: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"resolves:", "pid:", "address:", "dial: ok", "transports: ", "lane a dial takes: ", "lane: ",
		"exposed: kernel TCP on loopback only"} { // a directory registry: loopback only
		if !strings.Contains(r.stdout, s) {
			t.Errorf("info info-test lacks %q:\n%s", s, r.stdout)
		}
	}
	l.wait(t, 20*time.Second)
}

func TestDemo(t *testing.T) {
	reg := t.TempDir()
	// Smaller than the defaults, to keep the test quick under -race on a
	// small machine; the path is the same.
	r := runBin(t, reg, nil, 45*time.Second, "demo", "--rr", "300", "--rr-time", "1s", "--download", "16", "--echo", "8")
	if r.code != 0 {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"UCX version", "UCX transports [", "sha256 ok", "64 B round trip p50", "16 MiB download", "demo finished"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("demo output lacks %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "(unknown)") {
		t.Errorf("demo could not tell the transports:\n%s", r.stdout)
	}
	t.Logf("demo output:\n%s", r.stdout)
}

// A bad UCX_TLS: info prints ucxnet's error alone, whole, on stderr (no
// half report, no UCX log lines before it); UCX's own lines appear when
// UCX_LOG_LEVEL asks for them.
func TestInfoBadUCXTLSQuiet(t *testing.T) {
	if r := runBin(t, t.TempDir(), nil, 20*time.Second, "info"); !strings.Contains(r.stdout, "UCX version 1.") {
		t.Skip("no UCX in this build")
	}
	for _, level := range []string{"", "warn"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := binCommand(ctx, t, t.TempDir(), "info")
		var env []string
		for _, kv := range cmd.Env {
			if !strings.HasPrefix(kv, "UCX_TLS=") && !strings.HasPrefix(kv, "UCX_LOG_LEVEL=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "UCX_TLS=bogus")
		if level != "" {
			cmd.Env = append(cmd.Env, "UCX_LOG_LEVEL="+level)
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("UCX_LOG_LEVEL=%q: info with UCX_TLS=bogus: %v, want exit 1\nstderr:\n%s", level, err, errb.String())
		}
		if strings.Contains(out.String(), "UCX version") {
			t.Errorf("UCX_LOG_LEVEL=%q: a half report on stdout:\n%s", level, out.String())
		}
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "ucxnet: info: ") || !strings.Contains(last, "UCX_TLS") {
			t.Errorf("UCX_LOG_LEVEL=%q: stderr does not end with ucxnet's error:\n%s", level, errb.String())
		}
		// UCX writes its log lines to stdout.
		if ucxLines := strings.Contains(out.String()+errb.String(), " UCX  "); ucxLines != (level != "") {
			t.Errorf("UCX_LOG_LEVEL=%q: UCX's own lines: %v\nstdout:\n%s\nstderr:\n%s", level, ucxLines, out.String(), errb.String())
		}
	}
}

// --version shows the commit that make build stamps when Go records no
// VCS revision (GOFLAGS=-buildvcs=false, a tree without .git).
func TestVersionShowsStampedCommit(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ucxnet")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.commit=0123456789ab", "-o", out, ".")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	got, err := exec.Command(out, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "(revision 0123456789ab)") {
		t.Errorf("--version:\n%s\nwant the stamped revision", got)
	}
}
