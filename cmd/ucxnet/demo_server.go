package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// demoServerCmd is the child process of demo: one HTTP handler served on a
// ucxnet listener and on a TCP loopback listener.
var demoServerCmd = &command{
	Name:   "demo-server",
	Hidden: true,
	Args:   "",
	Short:  "(internal) the server process of demo",
	Long: `Demo-server is started by "ucxnet demo": it serves HTTP on a ucxnet listener
named --name and on a TCP listener on 127.0.0.1, prints "ready TCPADDR" on
stdout and runs until stdin reaches EOF (its parent exited) or a signal.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		name := fs.String("name", "", "ucxnet listener `name` (required)")
		netDevices := fs.String("net-devices", "", netDevicesUsage)
		return func(ctx context.Context, sio *stdio, args []string) error {
			if *name == "" || len(args) != 0 {
				return usagef("want --name and no arguments")
			}
			return runDemoServer(ctx, sio, *name, *netDevices)
		}
	},
}

// Demo HTTP endpoints.
const (
	pathHello    = "/hello"    // GET: a short text; the X-Ucxnet-Transports header
	pathEcho     = "/echo"     // POST: the body echoed back
	pathRR       = "/rr"       // POST 64 B: 64 B back
	pathDownload = "/download" // GET ?n=BYTES: BYTES of data

	headerTransports = "X-Ucxnet-Transports"
)

type connKey struct{}

func demoHandler() http.Handler {
	blob := make([]byte, 1<<20)
	_, _ = rand.Read(blob)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathHello, func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*ucxnet.Conn); ok {
			w.Header().Set(headerTransports, strings.Join(c.Transports(), " "))
		}
		nc := r.Context().Value(connKey{}).(net.Conn)
		fmt.Fprintf(w, "hello from the demo server (pid %d): %s conn %s -> %s", os.Getpid(), nc.LocalAddr().Network(), nc.RemoteAddr(), nc.LocalAddr())
	})
	mux.HandleFunc("POST "+pathEcho, func(w http.ResponseWriter, r *http.Request) {
		// HTTP/1 handlers must read the body before writing the response.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	rr := make([]byte, 64)
	copy(rr, "64-byte response ")
	mux.HandleFunc("POST "+pathRR, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "64")
		w.Write(rr)
	})
	mux.HandleFunc("GET "+pathDownload, func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 || n > 1<<34 {
			http.Error(w, "bad n", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		for n > 0 {
			m := min(n, int64(len(blob)))
			if _, err := w.Write(blob[:m]); err != nil {
				return
			}
			n -= m
		}
	})
	return mux
}

func runDemoServer(ctx context.Context, sio *stdio, name, netDevices string) error {
	t, err := newTransport(netDevices, nil)
	if err != nil {
		return err
	}
	defer t.Close()
	lc := ucxnet.ListenConfig{Transport: t}
	uln, err := lc.Listen(ctx, "ucx", name)
	if err != nil {
		return err
	}
	defer uln.Close()
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer tln.Close()

	h := demoHandler()
	newServer := func() *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, c)
			},
		}
	}
	us, ts := newServer(), newServer()
	errc := make(chan error, 2)
	go func() { errc <- us.Serve(uln) }()
	go func() { errc <- ts.Serve(tln) }()

	fmt.Fprintf(sio.Err, "server (pid %d) listens on TCP: %s\n", os.Getpid(), listeningSummary())
	fmt.Fprintf(sio.Out, "ready %s\n", tln.Addr())

	// Run until stdin closes (the parent is gone), a signal, or a server
	// fails.
	stdinEOF := make(chan struct{})
	go func() {
		io.Copy(io.Discard, bufio.NewReader(sio.In))
		close(stdinEOF)
	}()
	var serr error
	select {
	case <-stdinEOF:
	case <-ctx.Done():
	case serr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	us.Shutdown(sctx)
	ts.Shutdown(sctx)
	if serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return nil
}
