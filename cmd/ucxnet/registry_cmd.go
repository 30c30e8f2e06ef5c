package main

import (
	"context"
	"crypto/tls"
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
	Short: "serve a registry over HTTP(S) for listeners on many hosts",
	Long: `Registry serves a name registry over HTTP or HTTPS, for ucxnet listeners
and dialers on several hosts. Point them at it with

  UCXNET_REGISTRY=http://HOST:PORT ucxnet cat -l NAME

Entries are leases: a listener refreshes its entry every TTL/3 (TTL 10 s,
or $UCXNET_REGISTRY_TTL on the publisher's side, e.g. 500ms; at most 10 min,
never more than 1 h), and the entry of a process that dies vanishes within
one TTL. Entries are kept in memory only; after a restart, live listeners
register again within TTL/3.

Trust: every request but GET /healthz needs "Authorization: Bearer TOKEN".
The token is, in this order: the contents of --token-file, or
$UCXNET_REGISTRY_TOKEN, or the per-user default token file
(~/.local/state/ucxnet/registry-token, or $XDG_STATE_HOME/ucxnet/...), which
is created with a random token and mode 0600 on first start; its path is
printed. Clients on this host find that file by themselves for a registry
on a loopback address; elsewhere give them $UCXNET_REGISTRY_TOKEN or
$UCXNET_REGISTRY_TOKEN_FILE. A token file that group or others can read is
refused. --no-token serves without a token: then any local user can read,
take and hold names.

It binds to the loopback interface unless --listen says otherwise; a
non-loopback address without a token is refused unless --insecure is given.
With --tls-cert and --tls-key it serves HTTPS; clients verify the
certificate against the system's CAs or the PEM file in $UCXNET_REGISTRY_CA.
Over plain HTTP on a non-loopback address the token travels in clear.

Bounds: entry meta at most 4 KiB, entries at most 64 MiB together
(--max-bytes; a PUT beyond gets 507) and 100000, listings in pages of at
most 1000 entries and about 1 MiB.

It prints "listening on http://ADDR" (or https) on stdout once it serves,
logs one line per request on stderr (-q: none), and exits on SIGINT or
SIGTERM.

API (JSON): PUT /v1/entries/NAME, POST /v1/entries/NAME/refresh?lease=ID,
DELETE /v1/entries/NAME?lease=ID, GET /v1/entries[/NAME],
GET /v1/services/SERVICE (listings: ?limit=N&after=NAME, next cursor in
the X-Ucxnet-Next-After header), GET /healthz.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		var o registryOptions
		fs.StringVar(&o.addr, "listen", "127.0.0.1:7070", "TCP `address` to serve on (port 0: any free port)")
		fs.StringVar(&o.tokenFile, "token-file", "", "read the bearer token from `file` (mode 0600; default: $"+registry.EnvRegistryToken+", else the per-user default token file, created on first start)")
		fs.BoolVar(&o.noToken, "no-token", false, "serve without a token: any local user may read and write entries")
		fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback --listen address with --no-token")
		fs.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with the PEM certificate (chain) in `file`; needs --tls-key")
		fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key `file` of --tls-cert")
		fs.Int64Var(&o.maxBytes, "max-bytes", registry.DefaultMaxBytes, "bound on the memory all entries take, in `bytes`")
		fs.BoolVar(&o.quiet, "q", false, "do not log requests")
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("no arguments expected, got %q", args)
			}
			return runRegistry(ctx, sio, o)
		}
	},
}

type registryOptions struct {
	addr, tokenFile string
	noToken         bool
	insecure, quiet bool
	tlsCert, tlsKey string
	maxBytes        int64
}

// registryToken finds the server's token as the usage text says; where
// names the source for the log (never the token itself).
func registryToken(o registryOptions) (token, where string, err error) {
	switch {
	case o.noToken:
		if o.tokenFile != "" {
			return "", "", usagef("--no-token and --token-file exclude each other")
		}
		return "", "", nil
	case o.tokenFile != "":
		tok, err := registry.ReadTokenFile(o.tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		return tok, "token from " + o.tokenFile, nil
	}
	if tok := strings.TrimSpace(os.Getenv(registry.EnvRegistryToken)); tok != "" {
		return tok, "token from $" + registry.EnvRegistryToken, nil
	}
	path, err := registry.DefaultTokenFile()
	if err != nil {
		return "", "", fmt.Errorf("%w (or give --token-file, or --no-token)", err)
	}
	tok, created, err := registry.EnsureTokenFile(path)
	if err != nil {
		return "", "", fmt.Errorf("default token file: %w (or give --token-file, or --no-token)", err)
	}
	if created {
		return tok, "new token written to " + path, nil
	}
	return tok, "token from " + path, nil
}

func runRegistry(ctx context.Context, sio *stdio, o registryOptions) error {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if o.noToken && !o.insecure && !loopbackAddr(o.addr) {
		return usagef("--listen %s is not a loopback address: serving it with --no-token lets anyone who can reach it take names; add --insecure to do so anyway", o.addr)
	}
	token, where, err := registryToken(o)
	if err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return fmt.Errorf("loading --tls-cert/--tls-key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsCfg)
	}
	srv := registry.NewServer(registry.ServerConfig{Token: token, MaxBytes: o.maxBytes})
	defer srv.Close()
	var h http.Handler = srv
	if !o.quiet {
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
	auth := "NO TOKEN: any local user may read and write entries"
	if token != "" {
		auth = "bearer token required; " + where
	}
	url := fmt.Sprintf("%s://%s", scheme, ln.Addr())
	// stderr first: whoever waits for the stdout line finds both.
	fmt.Fprintf(sio.Err, "ucxnet registry: serving on %s (%s); UCXNET_REGISTRY=%s\n", url, auth, url)
	if token != "" && tlsCfg == nil && !loopbackAddr(o.addr) {
		fmt.Fprintf(sio.Err, "ucxnet registry: warning: plain HTTP on a non-loopback address: the token crosses the network in clear (use --tls-cert/--tls-key)\n")
	}
	fmt.Fprintf(sio.Out, "listening on %s\n", url)
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
