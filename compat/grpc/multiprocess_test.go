//go:build linux

package ucxgrpc_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	ucxgrpc "github.com/ucxnet/ucxnet/compat/grpc"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// helperEnv, set to a service name, makes TestHelperServer serve it.
const helperEnv = "UCXGRPC_TEST_HELPER_SERVICE"

// TestHelperServer is the server process TestMultiProcess starts: an
// instance of the service named in helperEnv, in the registry
// UCXNET_REGISTRY names. It prints "READY <instance name>" and serves
// until its stdin closes or it is killed.
func TestHelperServer(t *testing.T) {
	svc := os.Getenv(helperEnv)
	if svc == "" {
		t.Skip("helper process of TestMultiProcess")
	}
	tr, err := ucxnet.NewTransport(ucxnet.Config{}) // registry from UCXNET_REGISTRY
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	ln, err := ucxgrpc.Listen("", ucxgrpc.WithTransport(tr), ucxgrpc.WithService(svc))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, newTestServer(ln.Addr().String()))
	go srv.Serve(ln)
	fmt.Printf("READY %s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

type child struct {
	cmd    *exec.Cmd
	name   string
	exited chan struct{}
	stderr bytes.Buffer
}

// startChildren starts n helper servers of service svc on registry dir and
// returns them once each is published. They are killed when the test ends.
func startChildren(t *testing.T, n int, svc, dir string) []*child {
	t.Helper()
	var kids []*child
	var readies []chan string
	for range n {
		c := &child{exited: make(chan struct{})}
		c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperServer$", "-test.count=1")
		c.cmd.Env = append(os.Environ(), helperEnv+"="+svc, registry.EnvRegistry+"=dir:"+dir)
		// The child dies with us even if the cleanup below does not run.
		c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		stdin, err := c.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.cmd.Stderr = &c.stderr
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if name, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
					ready <- name
				}
			}
		}()
		// Reap it as soon as it dies, so that the registry sees it gone
		// (a zombie's pid is still alive to kill(pid, 0)).
		go func() {
			c.cmd.Wait()
			close(c.exited)
		}()
		t.Cleanup(func() {
			stdin.Close()
			c.cmd.Process.Kill()
			<-c.exited
		})
		kids = append(kids, c)
		readies = append(readies, ready)
	}
	for i, c := range kids {
		select {
		case c.name = <-readies[i]:
		case <-c.exited:
			t.Fatalf("helper exited before it was ready: %s", c.stderr.String())
		case <-time.After(60 * time.Second):
			t.Fatal("helper not ready after 60s")
		}
	}
	return kids
}

// TestMultiProcess: three server processes behind one service name, a
// round_robin client on "ucx:///<service>", one instance killed with
// SIGKILL mid-stream.
func TestMultiProcess(t *testing.T) {
	dir := t.TempDir()
	const svc = "multi"
	kids := startChildren(t, 3, svc, dir)
	var names []string
	for _, k := range kids {
		names = append(names, k.name)
	}
	slices.Sort(names)

	reg, err := registry.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	insts, err := reg.Instances(context.Background(), svc)
	if err != nil || len(insts) != 3 {
		t.Fatalf("Instances(%q) = %v, %v; want 3", svc, insts, err)
	}
	ct := newTransport(t, reg)
	cc := dial(t, "ucx:///"+svc,
		grpc.WithDefaultServiceConfig(roundRobin),
		ucxgrpc.WithUCX(ucxgrpc.WithTransport(ct), ucxgrpc.WithRefreshInterval(100*time.Millisecond)))
	c := testgrpc.NewTestServiceClient(cc)

	// Calls spread over all three processes.
	got := servedBy(t, c, names, 30, true)
	t.Logf("served by: %v", got)

	// A stream to one instance; that instance's process is killed.
	ctx := ctxFor(t, 30*time.Second)
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 10}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	md, err := stream.Header()
	if err != nil || len(md.Get(mdServer)) != 1 {
		t.Fatalf("stream header %v, %v", md, err)
	}
	victim := md.Get(mdServer)[0]
	var rest []string
	for _, k := range kids {
		if k.name == victim {
			if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		} else {
			rest = append(rest, k.name)
		}
	}
	if len(rest) != 2 {
		t.Fatalf("stream served by %q, not one of %v", victim, names)
	}
	start := time.Now()
	_, err = stream.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("stream to the killed instance: %v, want Unavailable", err)
	}
	t.Logf("stream failed %v after SIGKILL: %v", time.Since(start).Round(time.Millisecond), err)

	// Later calls all succeed, on the two live instances.
	slices.Sort(rest)
	got = servedBy(t, c, rest, 20, false)
	t.Logf("after the kill, served by: %v", got)
}
