package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/registry"
)

var registryCmd = &command{
	Name:  "registry",
	Short: "serve a registry over HTTP for listeners on many hosts",
	Long: `Registry serves a name registry over HTTP, for ucxnet listeners and dialers
on several hosts. Point them at it with

  UCXNET_REGISTRY=http://HOST:PORT ucxnet cat -l NAME

Entries are leases: a listener refreshes its entry every TTL/3 (TTL 10 s,
or $UCXNET_REGISTRY_TTL on the publisher's side, e.g. 500ms), and the entry of
a process that dies vanishes within one TTL. Entries are kept in memory only;
after a restart, live listeners register again within TTL/3.

With --token-file (or $UCXNET_REGISTRY_TOKEN) every request but GET /healthz
needs "Authorization: Bearer TOKEN"; clients send $UCXNET_REGISTRY_TOKEN.
It binds to the loopback interface unless --listen says otherwise; a
non-loopback address without a token is refused unless --insecure is given.

It prints "listening on http://ADDR" on stdout once it serves, logs one line
per request on stderr (-q: none), and exits on SIGINT or SIGTERM.

API (JSON): PUT /v1/entries/NAME, POST /v1/entries/NAME/refresh?lease=ID,
DELETE /v1/entries/NAME?lease=ID, GET /v1/entries[/NAME],
GET /v1/services/SERVICE, GET /healthz.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		listen := fs.String("listen", "127.0.0.1:7070", "TCP `address` to serve on (port 0: any free port)")
		tokenFile := fs.String("token-file", "", "read the bearer token from `file` (default: $"+registry.EnvRegistryToken+")")
		insecure := fs.Bool("insecure", false, "allow a non-loopback --listen address without a token")
		quiet := fs.Bool("q", false, "do not log requests")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("no arguments expected, got %q", args)
			}
			return runRegistry(ctx, sio, *listen, *tokenFile, *insecure, *quiet)
		}
	},
}

func runRegistry(ctx context.Context, sio *stdio, addr, tokenFile string, insecure, quiet bool) error {
	token := strings.TrimSpace(os.Getenv(registry.EnvRegistryToken))
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return fmt.Errorf("token file %s is empty", tokenFile)
		}
	}
	if token == "" && !insecure && !loopbackAddr(addr) {
		return usagef("--listen %s is not a loopback address: give a token (--token-file or $%s) or --insecure", addr, registry.EnvRegistryToken)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := registry.NewServer(registry.ServerConfig{Token: token})
	defer srv.Close()
	var h http.Handler = srv
	if !quiet {
		h = logRequests(sio.Err, srv)
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	auth := "no token"
	if token != "" {
		auth = "bearer token required"
	}
	fmt.Fprintf(sio.Out, "listening on http://%s\n", ln.Addr())
	fmt.Fprintf(sio.Err, "ucxnet registry: serving on http://%s (%s); UCXNET_REGISTRY=http://%s\n", ln.Addr(), auth, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	<-served
	fmt.Fprintf(sio.Err, "ucxnet registry: stopped, %d live entries dropped\n", srv.Len())
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopbackAddr reports whether the host of addr is a loopback address or
// "localhost".
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// logRequests logs "METHOD PATH STATUS DURATION REMOTE" per request; the
// query, which may hold a lease id, is left out.
func logRequests(w io.Writer, h http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: rw}
		h.ServeHTTP(sw, r)
		mu.Lock()
		fmt.Fprintf(w, "%s %s %q %d %v %s\n", start.Format("15:04:05.000"), r.Method, r.URL.Path, sw.code, time.Since(start).Round(time.Microsecond), r.RemoteAddr)
		mu.Unlock()
	})
}
