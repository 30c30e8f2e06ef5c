package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

var demoCmd = &command{
	Name:  "demo",
	Short: "HTTP over ucxnet between two processes, compared with TCP loopback",
	Long: `Demo starts an HTTP server in a child process, listening both on ucxnet and
on TCP 127.0.0.1, and talks to it from this process with net/http over
ucxnet: a GET, an 8 MiB POST echoed back (checked by SHA-256), then 64 B
request/response round trips and a large download over ucxnet and over
TCP loopback, side by side. Both processes use a private registry in a
temporary directory. UCX_TLS picks the UCX transports (e.g. UCX_TLS=sm or
UCX_TLS=tcp); unset, UCX picks the best it finds. Both processes print the
TCP addresses they listen on: UCX's tcp transport listens on every
interface it may use (--net-devices, i.e. UCX_NET_DEVICES, restricts it).`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		var o demoOptions
		fs.IntVar(&o.rounds, "rr", 2000, "64 B round trips to time per transport (also bounded by --rr-time)")
		fs.DurationVar(&o.rrTime, "rr-time", 2*time.Second, "most `time` spent on round trips per transport")
		fs.IntVar(&o.downloadMiB, "download", 64, "download size in `MiB` per transport")
		fs.IntVar(&o.echoMiB, "echo", 8, "POST body size in `MiB` echoed back")
		fs.StringVar(&o.netDevices, "net-devices", "", netDevicesUsage)
		fs.DurationVar(&o.hold, "hold", 0, "at the end, keep both processes and their conns open this `long` (Ctrl-C ends it), for `ucxnet ls` in another terminal")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("demo takes no arguments")
			}
			if o.rounds < 1 || o.downloadMiB < 1 || o.echoMiB < 1 {
				return usagef("--rr, --download and --echo must be positive")
			}
			return runDemo(ctx, sio, o)
		}
	},
}

type demoOptions struct {
	rounds      int
	rrTime      time.Duration
	downloadMiB int
	echoMiB     int
	netDevices  string
	hold        time.Duration
}

func runDemo(ctx context.Context, sio *stdio, o demoOptions) (err error) {
	w := sio.Out
	t0 := time.Now()
	printDemoHeader(w)
	dir, spec, reg, err := privateRegistry("ucxnet-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := "demo-" + registry.UniqueName()

	child, tcpAddr, err := startDemoServer(ctx, sio, spec, name, o.netDevices)
	if err != nil {
		return err
	}
	defer child.stop()
	fmt.Fprintf(w, "server: pid %d, ucxnet listener %q, TCP listener %s (registry %s)\n\n",
		child.cmd.Process.Pid, name, tcpAddr, spec)

	t, err := newTransport(o.netDevices, reg)
	if err != nil {
		return err
	}
	defer t.Close()
	fmt.Fprintf(w, "this process (pid %d) listens on TCP: %s\n", os.Getpid(), listeningSummary())

	c := newDemoClient(w, t, name, tcpAddr)
	defer c.close()
	if err := c.hello(ctx); err != nil {
		return err
	}
	if err := c.echo(ctx, o.echoMiB); err != nil {
		return err
	}
	if err := c.compare(ctx, o); err != nil {
		return err
	}
	nconns, tl := c.carried()
	st := t.Stats()
	fmt.Fprintf(w, "\nucxnet carried all of it over UCX transports %s, in %d conn(s)\n", fmtTransports(tl), nconns)
	fmt.Fprintf(w, "client transport: %d frames / %d bytes out, %d frames / %d bytes in, %d resets, %d peer failures\n",
		st.FramesOut, st.BytesOut, st.FramesIn, st.BytesIn, st.ResetsReceived+st.ResetsSent, st.PeerFailures)
	fmt.Fprintf(w, "demo finished in %v\n", time.Since(t0).Round(10*time.Millisecond))
	if o.hold <= 0 {
		fmt.Fprintf(w, "(to see both processes' conns live: ucxnet demo --hold 30s, and ucxnet ls in another terminal)\n")
		return nil
	}
	fmt.Fprintf(w, "holding both processes and their conns open for %v (Ctrl-C ends it): run ucxnet ls in another terminal\n", o.hold)
	select {
	case <-ctx.Done():
	case <-time.After(o.hold):
	}
	return nil
}

// printDemoHeader prints what the demo runs on: the UCX library, UCX_TLS
// and the UCX settings ucxnet applies.
func printDemoHeader(w io.Writer) {
	fmt.Fprintf(w, "ucxnet demo: HTTP/1.1 over UCX active messages between two processes\n")
	printUCXLibrary(w)
	if tls, ok := os.LookupEnv("UCX_TLS"); ok {
		fmt.Fprintf(w, "UCX_TLS=%s\n", tls)
	} else {
		fmt.Fprintf(w, "UCX_TLS not set: UCX picks from every transport it finds\n")
	}
	if defs := ucxnet.EffectiveUCXDefaults(); len(defs) > 0 {
		var kv []string
		for _, k := range sortedKeys(defs) {
			kv = append(kv, k+"="+defs[k])
		}
		fmt.Fprintf(w, "ucxnet defaults applied: %s\n", strings.Join(kv, " "))
	}
}

// demoChild is the running demo-server process.
type demoChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has exited
	err   error         // cmd.Wait's result, once done is closed
	once  sync.Once
}

// stop ends the child: EOF on its stdin asks it to exit; a kill follows if
// it has not after two seconds.
func (c *demoChild) stop() {
	c.once.Do(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// readyWriter forwards the child's stdout to w with a prefix and reports
// the "ready ADDR" line.
type readyWriter struct {
	w     io.Writer
	mu    sync.Mutex
	buf   []byte
	ready chan string
	sent  bool
}

func (r *readyWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		line := string(r.buf[:i])
		r.buf = r.buf[i+1:]
		if addr, ok := strings.CutPrefix(line, "ready "); ok && !r.sent {
			r.sent = true
			r.ready <- addr
			continue
		}
		fmt.Fprintf(r.w, "[server] %s\n", line)
	}
	return len(p), nil
}

// startDemoServer re-executes this program as demo-server with the given
// registry and listener name, and waits for it to be ready.
func startDemoServer(ctx context.Context, sio *stdio, spec, name, netDevices string) (*demoChild, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("finding own executable: %w", err)
	}
	cmd := exec.Command(exe, demoServerCmd.Name, "--name", name, "--net-devices", netDevices)
	cmd.Env = append(os.Environ(), registry.EnvRegistry+"="+spec)
	rw := &readyWriter{w: sio.Err, ready: make(chan string, 1)}
	cmd.Stdout = rw
	cmd.Stderr = sio.Err
	cmd.WaitDelay = time.Second
	setChildAttrs(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting server process: %w", err)
	}
	child := &demoChild{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		child.err = cmd.Wait()
		close(child.done)
	}()
	select {
	case addr := <-rw.ready:
		return child, addr, nil
	case <-child.done:
		return nil, "", fmt.Errorf("server process exited before it was ready: %v", child.err)
	case <-time.After(15 * time.Second):
		child.stop()
		return nil, "", errors.New("server process not ready after 15s")
	case <-ctx.Done():
		child.stop()
		return nil, "", ctx.Err()
	}
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// ratio formats a/b as "1.52x"; larger is better for ucxnet.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func fmtTransports(tl []string) string {
	if len(tl) == 0 {
		return "(unknown)"
	}
	return "[" + strings.Join(tl, " ") + "]"
}

// privateRegistry makes a directory registry in a fresh temporary folder
// for a parent and the child it starts, so that demo and bench work on a
// fresh machine and cannot meet other listeners. The caller removes dir.
func privateRegistry(prefix string) (dir, spec string, reg registry.Registry, err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", nil, err
	}
	spec = "dir:" + dir
	if reg, err = registry.Open(spec); err != nil {
		os.RemoveAll(dir)
		return "", "", nil, err
	}
	return dir, spec, reg, nil
}
