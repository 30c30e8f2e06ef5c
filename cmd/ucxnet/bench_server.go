package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// benchServerCmd is the child process of bench: for each transport, an
// echo server, a sink and an HTTP server.
var benchServerCmd = &command{
	Name:   "bench-server",
	Hidden: true,
	Short:  "(internal) the server process of bench",
	Long: `Bench-server is started by "ucxnet bench". For each transport in
--transports it listens three times: an echo server (every byte read is
written back), a sink (reads to EOF, then writes the byte count as 8 bytes
big-endian and closes) and an HTTP server (GET / answers 16 bytes). It
prints "ready JSON" on stdout, JSON mapping transport to service to
address, then answers commands on stdin, one a line:

  rusage   answers "rusage USER_US SYS_US": this process's CPU time so far
  addrs    answers "addrs JSON", the JSON of the ready line

It exits at EOF on stdin (its parent is gone) or on a signal. "ucxnet
bench --serve NAME" runs the same servers on their own, with the commands
on the ucxnet listener NAME.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		transports := fs.String("transports", "ucx,tcp,unix", "comma-separated `list` of ucx, tcp, unix")
		dir := fs.String("dir", "", "`directory` for the unix sockets (required with unix)")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("bench-server takes no arguments")
			}
			tl, err := parseTransports(*transports)
			if err != nil {
				return usagef("%v", err)
			}
			return runBenchServer(ctx, sio, tl, benchServe{dir: *dir})
		}
	},
}

// Bench services, each listened on once per transport.
const (
	svcEcho = "echo"
	svcSink = "sink"
	svcHTTP = "http"
)

var benchServices = []string{svcEcho, svcSink, svcHTTP}

// benchHTTPBody is the answer of the bench HTTP server.
var benchHTTPBody = []byte("bench response\n")

// benchServe says where a bench server runs: as bench's child (name "")
// or on its own under name, for "bench --remote name" on another host.
type benchServe struct {
	dir     string // directory for the unix sockets
	name    string // "": bench's child; else the published control name
	tcpHost string // host for the Go TCP servers; "" = the child's loopback or the lane's endpoint
}

func runBenchServer(ctx context.Context, sio *stdio, transports []string, sv benchServe) error {
	s := &benchServer{sv: sv, addrs: map[string]map[string]string{}, tcpHost: "127.0.0.1"}
	defer s.close()
	if sv.name != "" {
		if err := s.openControl(ctx); err != nil {
			return err
		}
	}
	for _, tr := range transports {
		if err := s.listen(ctx, tr); err != nil {
			return err
		}
	}
	errc := make(chan error, len(s.lns)+1)
	servers := s.serve(errc)
	b, err := json.Marshal(s.addrs)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(sio.Out)
	fmt.Fprintf(out, "ready %s\n", b)
	if err := out.Flush(); err != nil {
		return err
	}

	// Commands: on stdin until EOF (bench's child), or on each conn to the
	// control listener until a signal.
	cmdDone := make(chan error, 1)
	if s.ctl == nil {
		go func() { cmdDone <- benchCommands(sio.In, sio.Out, b) }()
	} else {
		fmt.Fprintf(sio.Err, "bench server %s: ucx %s, Go TCP on %s; run \"ucxnet bench --remote %s\" with the same registry; Ctrl-C ends it\n",
			sv.name, sv.name+"-{echo,sink,http}", s.tcpHost, sv.name)
		go func() {
			errc <- serveConns(s.ctl, func(c net.Conn) { benchCommands(c, c, b) })
		}()
	}
	var serr error
	select {
	case <-cmdDone:
	case <-ctx.Done():
	case serr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for _, hs := range servers {
		hs.Shutdown(sctx)
	}
	if serr != nil && !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, net.ErrClosed) {
		return serr
	}
	return nil
}

// benchServer holds the listeners of a bench server.
type benchServer struct {
	sv      benchServe
	lns     []benchListener
	addrs   map[string]map[string]string // transport → service → address
	ut      *ucxnet.Transport            // nil until a ucx listener needs it
	ctl     net.Listener                 // the control listener of bench --serve; nil for bench's child
	tcpHost string                       // host the Go TCP servers listen on
}

// close closes every listener and the ucxnet transport.
func (s *benchServer) close() {
	for _, l := range s.lns {
		l.ln.Close()
	}
	if s.ctl != nil {
		s.ctl.Close()
	}
	if s.ut != nil {
		s.ut.Close()
	}
}

// transport is the server's ucxnet transport, made on first use.
func (s *benchServer) transport() (*ucxnet.Transport, error) {
	if s.ut == nil {
		ut, err := ucxnet.DefaultTransport()
		if err != nil {
			return nil, err
		}
		s.ut = ut
	}
	return s.ut, nil
}

// openControl opens the control listener of bench --serve and picks the Go
// TCP servers' host.
func (s *benchServer) openControl(ctx context.Context) error {
	ut, err := s.transport()
	if err != nil {
		return err
	}
	if s.ctl, err = (&ucxnet.ListenConfig{Transport: ut}).Listen(ctx, "ucx", s.sv.name); err != nil {
		return fmt.Errorf("control listener: %w", err)
	}
	s.tcpHost, err = serveTCPHost(ut, s.sv)
	return err
}

// listen opens the listener of each bench service over transport tr.
func (s *benchServer) listen(ctx context.Context, tr string) error {
	s.addrs[tr] = map[string]string{}
	for _, svc := range benchServices {
		var (
			ln  net.Listener
			err error
		)
		switch tr {
		case "ucx":
			ln, err = s.listenUCX(ctx, svc)
		case "tcp":
			ln, err = net.Listen("tcp", net.JoinHostPort(s.tcpHost, "0"))
		case "unix":
			if s.sv.dir == "" {
				return usagef("--dir is required with unix")
			}
			ln, err = net.Listen("unix", filepath.Join(s.sv.dir, svc+".sock"))
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", tr, svc, err)
		}
		s.lns = append(s.lns, benchListener{svc, ln})
		s.addrs[tr][svc] = ln.Addr().String()
	}
	return nil
}

// listenUCX opens the ucxnet listener of service svc: under a unique name
// for bench's child, under the --serve name and the service's for bench
// --serve.
func (s *benchServer) listenUCX(ctx context.Context, svc string) (net.Listener, error) {
	ut, err := s.transport()
	if err != nil {
		return nil, err
	}
	name := "bench-" + svc + "-" + registry.UniqueName()
	if s.sv.name != "" {
		name = s.sv.name + "-" + svc
	}
	return (&ucxnet.ListenConfig{Transport: ut}).Listen(ctx, "ucx", name)
}

// serve serves each listener in a goroutine that sends its end to errc,
// and returns the HTTP servers, for their shutdown.
func (s *benchServer) serve(errc chan<- error) []*http.Server {
	var servers []*http.Server
	for _, l := range s.lns {
		switch l.svc {
		case svcHTTP:
			hs := &http.Server{Handler: benchHTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
			servers = append(servers, hs)
			go func() { errc <- hs.Serve(l.ln) }()
		case svcEcho:
			go func() { errc <- serveConns(l.ln, benchEcho) }()
		case svcSink:
			go func() { errc <- serveConns(l.ln, benchSink) }()
		}
	}
	return servers
}

// serveTCPHost returns the host the Go TCP servers of "bench --serve"
// listen on: --tcp-host, else the host of the first TCP endpoint the
// control listener publishes for the kernel-TCP lane (so that Go's TCP and
// the lane cross the same link).
func serveTCPHost(ut *ucxnet.Transport, sv benchServe) (string, error) {
	if sv.tcpHost != "" {
		return sv.tcpHost, nil
	}
	info, err := ut.LaneTo(sv.name)
	if err != nil {
		return "", fmt.Errorf("reading back the control listener's entry: %w", err)
	}
	for _, ep := range info.Endpoints {
		if h, _, err := net.SplitHostPort(ep); err == nil {
			return h, nil
		}
	}
	return "", usagef("the listener publishes no TCP endpoint (UCX_TLS set, or the lane forced to ucx): give --tcp-host")
}

// benchCommands answers the bench server's commands, one a line, read from
// r until EOF, on w:
//
//	rusage   "rusage USER_US SYS_US": this process's CPU time so far
//	addrs    "addrs JSON": transport → service → address
func benchCommands(r io.Reader, w io.Writer, addrs []byte) error {
	out := bufio.NewWriter(w)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		switch cmd := strings.TrimSpace(sc.Text()); cmd {
		case "rusage":
			u, s := selfRusage()
			fmt.Fprintf(out, "rusage %d %d\n", u.Microseconds(), s.Microseconds())
		case "addrs":
			fmt.Fprintf(out, "addrs %s\n", addrs)
		case "":
			continue
		default:
			fmt.Fprintf(out, "error unknown command %q\n", cmd)
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

type benchListener struct {
	svc string
	ln  net.Listener
}

func benchHTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", fmt.Sprint(len(benchHTTPBody)))
		w.Write(benchHTTPBody)
	})
}

// serveConns accepts conns on ln and runs f on each, until ln is closed.
func serveConns(ln net.Listener, f func(net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			f(c)
		}()
	}
}

// benchEcho writes back whatever it reads, with a plain read/write loop
// (io.Copy would splice TCP to TCP, a path ucxnet has no counterpart of).
func benchEcho(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// benchSink reads to EOF and acknowledges the byte count (8 bytes,
// big-endian), so that the writer's measurement covers delivery.
func benchSink(c net.Conn) {
	buf := make([]byte, 1<<20)
	var total uint64
	for {
		n, err := c.Read(buf)
		total += uint64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return
		}
	}
	var ack [8]byte
	binary.BigEndian.PutUint64(ack[:], total)
	c.Write(ack[:])
	// Wait for the writer to close, so that the ack is not lost to an
	// early close.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Read(buf[:1])
}

// selfRusage returns the user and system CPU time of this process so far.
func selfRusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
