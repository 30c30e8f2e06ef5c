//go:build linux

package ucxetcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	ucxetcd "github.com/ucxnet/ucxnet/compat/etcd"
	"github.com/ucxnet/ucxnet/registry"
)

// etcdServer is a single-member etcd run from the etcd binary.
type etcdServer struct {
	dir        string
	clientAddr string // host:port
	peerURL    string
	cmd        *exec.Cmd
	log        *os.File
}

var (
	// shared is the server most tests use; nil with skipReason set when
	// there is no etcd binary.
	shared     *etcdServer
	skipReason string
	etcdPath   string
)

const childEnv = "UCXETCD_TEST_CHILD" // set in a re-executed child: "endpoint prefix name"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		runChild(spec)
		return
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	var err error
	if etcdPath, err = exec.LookPath("etcd"); err != nil {
		skipReason = "no etcd binary in PATH (install etcd-server, e.g. `make deps`): " + err.Error()
		fmt.Println("ucxetcd tests: skipping the tests that need etcd:", skipReason)
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "ucxetcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = startEtcd(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ucxetcd tests:", err)
		return 1
	}
	defer shared.stop()
	return m.Run()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts a fresh etcd with its data in dir/data.
func startEtcd(dir string) (*etcdServer, error) {
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &etcdServer{
		dir:        dir,
		clientAddr: fmt.Sprintf("127.0.0.1:%d", cp),
		peerURL:    fmt.Sprintf("http://127.0.0.1:%d", pp),
	}
	return s, s.start()
}

// start runs etcd on s's ports and data dir and waits until it answers.
func (s *etcdServer) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	curl := "http://" + s.clientAddr
	cmd := exec.Command(etcdPath,
		"--name", "t", "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", s.peerURL, "--initial-advertise-peer-urls", s.peerURL,
		"--initial-cluster", "t="+s.peerURL,
		"--logger", "zap", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting etcd: %w", err)
	}
	s.cmd, s.log = cmd, log
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.clientAddr}, Logger: zap.NewNop()})
	if err != nil {
		s.stop()
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.stop()
			b, _ := os.ReadFile(log.Name())
			return fmt.Errorf("etcd at %s did not answer within 15 s: %v\n%s", s.clientAddr, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills etcd (SIGKILL: a crash; the data dir stays consistent).
func (s *etcdServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.log.Close()
	s.cmd = nil
}

// needEtcd skips t when there is no etcd, and returns the shared server.
func needEtcd(t *testing.T) *etcdServer {
	t.Helper()
	if shared == nil {
		t.Skip(skipReason)
	}
	return shared
}

// newClient returns a client of s, closed when t ends.
func newClient(t *testing.T, s *etcdServer) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.clientAddr}, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// testPrefix is a key prefix of t's own.
func testPrefix(t *testing.T) string {
	return "/ucxnet-test/" + strings.ReplaceAll(t.Name(), "/", "_")
}

// newRegistry returns a registry on its own client of s, closed when t ends.
func newRegistry(t *testing.T, s *etcdServer, prefix string, opts ...ucxetcd.Option) *ucxetcd.Registry {
	t.Helper()
	r := ucxetcd.New(newClient(t, s), prefix, opts...)
	t.Cleanup(func() { r.Close() })
	return r
}

func entry(name, service string) registry.Entry {
	pid, st, host := registry.CurrentProcess()
	return registry.Entry{Name: name, Service: service, Address: []byte("addr-" + name), PID: pid, StartTime: st, Host: host}
}

// ctx returns a context bounded by 10 s, cancelled when t ends.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitFor polls cond every 50 ms until it holds or d passes, and returns
// how long that took.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// startChild re-executes the test binary as a publisher of name (TTL 2 s)
// and waits until it has registered.
func startChild(t *testing.T, s *etcdServer, prefix, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+s.clientAddr+" "+prefix+" "+name)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: got %q, %v", line, err)
	}
	return cmd
}

// runChild is the re-executed child: it registers a name and waits to be
// killed.
func runChild(spec string) {
	f := strings.Fields(spec)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f[0]}, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	r := ucxetcd.New(cli, f[1], ucxetcd.WithTTL(2*time.Second))
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Register(c, entry(f[2], "")); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	select {}
}
