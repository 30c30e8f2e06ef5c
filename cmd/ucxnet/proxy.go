package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

var proxyCmd = &command{
	Name:  "proxy",
	Short: "bridge TCP and ucxnet: --listen tcp:ADDR|ucx:NAME --to tcp:ADDR|ucx:NAME",
	Long: `Proxy accepts conns on one side and connects each to the other side,
copying bytes both ways, so that programs not written in Go can use ucxnet
links unchanged:

  ucxnet proxy --listen tcp:127.0.0.1:8080 --to ucx:web   TCP clients reach ucxnet name "web"
  ucxnet proxy --listen ucx:web --to tcp:127.0.0.1:80     publish "web", forward to a TCP server

tcp→tcp and ucx→ucx work too. Once the proxy listens it prints one line on
stdout, "listening LISTEN -> TO", where LISTEN is the bound address (for
tcp:127.0.0.1:0 the real port). With -v each conn opened and closed is
reported on stderr with the bytes copied each way; without it stderr has
only the proxy's start and end and its failures (a connect that fails, a
conn refused over --max-conns), and --quiet leaves out all but refusals.

Half-close is passed through: when one side's reading hits EOF, the proxy
shuts down writing on the other side (CloseWrite), and closes both once
both directions are finished. An error on one side resets the other (TCP
and ucx alike, with SetLinger(0)), so a backend's reset reaches the client
as a reset, not as a clean end of stream. A conn that moves no byte either
way for --idle-timeout is reset on both sides, so idle clients cannot hold
the --max-conns slots for ever. On SIGINT or SIGTERM the proxy stops accepting, lets open
conns finish for up to --grace, closes what is left and exits 0.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		listen := fs.String("listen", "", "`side` to accept conns on: tcp:HOST:PORT or ucx:NAME")
		to := fs.String("to", "", "`side` to connect each conn to: tcp:HOST:PORT or ucx:NAME")
		dialTimeout := fs.Duration("dial-timeout", 10*time.Second, "`timeout` for connecting to --to")
		grace := fs.Duration("grace", 2*time.Second, "on SIGINT/SIGTERM, let open conns finish for up to `time`")
		quiet := fs.Bool("quiet", false, "no messages on stderr but refusals over --max-conns")
		verbose := fs.Bool("v", false, "a line on stderr for each conn opened and closed, with the bytes copied")
		maxConns := fs.Int("max-conns", 1024, "bound on concurrent proxied conns; conns accepted beyond it are closed at once, counted and logged (0: no bound)")
		idle := fs.Duration("idle-timeout", 5*time.Minute, "reset a conn after `time` without a byte read from either side (0: never)")
		netDevices := fs.String("net-devices", "", netDevicesUsage)
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("unexpected arguments %q", args)
			}
			if *listen == "" || *to == "" {
				return usagef("want both --listen and --to")
			}
			ln, err := parseSide(*listen)
			if err != nil {
				return usagef("--listen: %v", err)
			}
			dst, err := parseSide(*to)
			if err != nil {
				return usagef("--to: %v", err)
			}
			if *maxConns < 0 {
				return usagef("--max-conns %d: want 0 (no bound) or more", *maxConns)
			}
			if *idle < 0 {
				return usagef("--idle-timeout %v: want 0 (never) or more", *idle)
			}
			p := &proxy{from: ln, to: dst, dialTimeout: *dialTimeout, grace: *grace, quiet: *quiet, verbose: *verbose, sio: sio,
				maxConns: *maxConns, idleTimeout: *idle, netDevices: *netDevices}
			return p.run(ctx)
		}
	},
}

// side is one end of the proxy: a TCP address or a ucxnet name.
type side struct {
	network string // "tcp" or "ucx"
	addr    string
}

func (s side) String() string { return s.network + ":" + s.addr }

func parseSide(s string) (side, error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return side{}, fmt.Errorf("%q: want tcp:HOST:PORT or ucx:NAME", s)
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return side{}, fmt.Errorf("%q: %v", s, err)
		}
	case "ucx":
	default:
		return side{}, fmt.Errorf("%q: unknown network %q (want tcp or ucx)", s, network)
	}
	return side{network, addr}, nil
}

// copyBufSize is the buffer of each direction of each conn.
const copyBufSize = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

type proxy struct {
	from, to    side
	dialTimeout time.Duration
	grace       time.Duration
	quiet       bool
	verbose     bool // -v: log each conn's open and close
	sio         *stdio
	maxConns    int           // 0: no bound
	idleTimeout time.Duration // 0: none
	netDevices  string        // UCX NET_DEVICES; "" leaves UCX's choice

	active      atomic.Int64  // conns being handled
	refused     atomic.Uint64 // conns closed at once for --max-conns
	refusedLogN atomic.Uint64 // refused count when last logged

	t      *ucxnet.Transport // nil unless a side is ucx
	logMu  sync.Mutex
	nextID atomic.Uint64

	mu      sync.Mutex
	conns   map[*pair]struct{}
	aborted bool // the grace period is over: abort new pairs too
}

func (p *proxy) logf(format string, args ...any) {
	if p.quiet {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	fmt.Fprintf(p.sio.Err, "ucxnet proxy: "+format+"\n", args...)
}

// connf logs a conn's open or close: with -v only.
func (p *proxy) connf(format string, args ...any) {
	if p.verbose {
		p.logf(format, args...)
	}
}

func (p *proxy) run(ctx context.Context) error {
	if p.from.network == "ucx" || p.to.network == "ucx" {
		t, err := newTransport(p.netDevices, nil)
		if err != nil {
			return err
		}
		p.t = t
		defer t.Close()
	}
	ln, err := p.listen(ctx)
	if err != nil {
		return err
	}
	bound := side{p.from.network, ln.Addr().String()}
	if p.from.network == "ucx" {
		bound.addr = p.from.addr
	}
	fmt.Fprintf(p.sio.Out, "listening %s -> %s\n", bound, p.to)
	if p.t != nil {
		p.logf("registry %s", p.t.Registry())
		p.logf("this process listens on TCP %s", listeningSummary())
	}

	p.conns = make(map[*pair]struct{})
	var wg sync.WaitGroup
	// dialCtx is cancelled when the grace period ends, so that dials in
	// progress give up then.
	dialCtx, cancelDials := context.WithCancel(context.Background())
	defer cancelDials()

	acceptDone := make(chan error, 1)
	go func() { acceptDone <- p.accept(ctx, ln, dialCtx, &wg) }()
	select {
	case <-ctx.Done():
	case err := <-acceptDone: // the listener failed by itself
		if err == nil {
			err = errors.New("listener closed")
		}
		return err
	}
	ln.Close()
	<-acceptDone
	p.logf("shutting down: %d conns open, %d refused over --max-conns %d", p.open(), p.refused.Load(), p.maxConns)
	p.drain(&wg, cancelDials)
	return nil
}

// accept accepts conns on ln and handles each in a goroutine counted by
// wg, dialing under dialCtx, until ln is closed. It backs off on other
// accept errors (out of fds and the like) and goes on.
func (p *proxy) accept(ctx context.Context, ln net.Listener, dialCtx context.Context, wg *sync.WaitGroup) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay *= 2; delay > time.Second {
				delay = time.Second
			}
			p.logf("accept: %v; retrying in %v", err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if p.maxConns > 0 && p.active.Load() >= int64(p.maxConns) {
			p.refuse(c)
			continue
		}
		p.active.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.active.Add(-1)
			p.handle(dialCtx, c)
		}()
	}
}

// drain waits for the conns counted by wg to finish, for up to the grace
// period; then it cancels the dials in progress and aborts every pair left.
func (p *proxy) drain(wg *sync.WaitGroup, cancelDials context.CancelFunc) {
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(p.grace):
		cancelDials()
		p.mu.Lock()
		p.aborted = true
		n := len(p.conns)
		for pr := range p.conns {
			pr.abort()
		}
		p.mu.Unlock()
		p.logf("grace period over: closed %d conns", n)
		<-allDone
	}
}

// refuse closes c at once (a reset on TCP) because --max-conns conns are
// open, and counts it. It logs the first refusal and then at most one line
// per doubling of the count, so that a flood cannot flood stderr too.
func (p *proxy) refuse(c net.Conn) {
	if lc, ok := c.(interface{ SetLinger(int) error }); ok {
		_ = lc.SetLinger(0)
	}
	from := describe(c)
	_ = c.Close()
	n := p.refused.Add(1)
	if last := p.refusedLogN.Load(); n == 1 || n >= 2*last {
		if p.refusedLogN.CompareAndSwap(last, n) {
			// Refusals are logged even with --quiet: they mean lost service.
			p.logMu.Lock()
			fmt.Fprintf(p.sio.Err, "ucxnet proxy: refused conn from %s: %d conns open (--max-conns %d); %d refused so far\n", from, p.active.Load(), p.maxConns, n)
			p.logMu.Unlock()
		}
	}
}

func (p *proxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *proxy) listen(ctx context.Context) (net.Listener, error) {
	if p.from.network == "ucx" {
		lc := ucxnet.ListenConfig{Transport: p.t}
		return lc.Listen(ctx, "ucx", p.from.addr)
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, p.from.network, p.from.addr)
}

func (p *proxy) dial(ctx context.Context) (net.Conn, error) {
	if p.to.network == "ucx" {
		d := ucxnet.Dialer{Timeout: p.dialTimeout, Transport: p.t}
		return d.DialContext(ctx, "ucx", p.to.addr)
	}
	d := net.Dialer{Timeout: p.dialTimeout}
	return d.DialContext(ctx, p.to.network, p.to.addr)
}

// pair is one proxied conn: a (accepted) and b (dialed).
type pair struct {
	a, b      net.Conn
	abortOnce sync.Once
	aborted   atomic.Bool
	idle      atomic.Bool  // aborted for --idle-timeout
	lastRead  atomic.Int64 // UnixNano of the last read that got bytes, either side
}

// watchIdle aborts pr once no byte has been read from either side for
// timeout, checking when the timeout would run out. The returned function
// stops the watch.
func (pr *pair) watchIdle(timeout time.Duration) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	pr.lastRead.Store(time.Now().UnixNano())
	var (
		mu      sync.Mutex
		tm      *time.Timer
		stopped bool
	)
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		left := timeout - time.Since(time.Unix(0, pr.lastRead.Load()))
		if left > 0 {
			tm.Reset(left)
			return
		}
		pr.idle.Store(true)
		pr.abort()
	}
	mu.Lock()
	tm = time.AfterFunc(timeout, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		tm.Stop()
		mu.Unlock()
	}
}

// activityReader records in pr when a read got bytes.
type activityReader struct {
	r  io.Reader
	pr *pair
}

func (ar activityReader) Read(b []byte) (int, error) {
	n, err := ar.r.Read(b)
	if n > 0 {
		ar.pr.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// abort closes both sides at once, resetting TCP sides, so that the
// copies in progress return.
func (pr *pair) abort() {
	pr.abortOnce.Do(func() {
		pr.aborted.Store(true)
		for _, c := range []net.Conn{pr.a, pr.b} {
			if lc, ok := c.(interface{ SetLinger(int) error }); ok {
				_ = lc.SetLinger(0) // RST instead of FIN, on TCP and ucx alike
			}
			_ = c.Close()
		}
	})
}

func describe(c net.Conn) string {
	if uc, ok := c.(*ucxnet.Conn); ok {
		return fmt.Sprintf("ucx:%s (via %s)", c.RemoteAddr(), strings.Join(uc.Transports(), " "))
	}
	return "tcp:" + c.RemoteAddr().String()
}

func (p *proxy) handle(ctx context.Context, a net.Conn) {
	id := p.nextID.Add(1)
	start := time.Now()
	b, err := p.dial(ctx)
	if err != nil {
		p.logf("conn %d: from %s: connecting to %s: %v", id, describe(a), p.to, err)
		if lc, ok := a.(interface{ SetLinger(int) error }); ok {
			_ = lc.SetLinger(0)
		}
		a.Close()
		return
	}
	p.connf("conn %d: open %s -> %s", id, describe(a), describe(b))
	pr := &pair{a: a, b: b}
	p.mu.Lock()
	p.conns[pr] = struct{}{}
	if p.aborted {
		pr.abort()
	}
	p.mu.Unlock()

	stopIdle := pr.watchIdle(p.idleTimeout)
	up, down, err := pr.run()
	stopIdle()

	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
	status, logf := "closed", p.connf
	if err != nil {
		status, logf = "failed: "+err.Error(), p.logf // a failure is logged without -v too
	}
	logf("conn %d: %s: %d bytes in (-> %s), %d bytes out (<- %s), %v",
		id, status, up, p.to, down, p.to, time.Since(start).Round(time.Millisecond))
}

// run copies a→b and b→a until both directions are finished, passing
// half-closes through, and closes both. It returns the bytes copied each
// way and the first error (nil after a clean finish).
func (pr *pair) run() (up, down int64, err error) {
	type result struct {
		n   int64
		err error
	}
	upc, downc := make(chan result, 1), make(chan result, 1)
	go func() { n, err := pr.pipe(pr.b, pr.a); upc <- result{n, err} }()
	go func() { n, err := pr.pipe(pr.a, pr.b); downc <- result{n, err} }()
	ru, rd := <-upc, <-downc
	err = ru.err
	if err == nil {
		err = rd.err
	}
	if pr.idle.Load() {
		err = errors.New("idle for --idle-timeout, reset by the proxy")
	} else if err == nil && pr.aborted.Load() {
		err = errors.New("closed by the proxy")
	}
	if err == nil {
		// Both directions finished cleanly: both sides read EOF, so
		// closing sends nothing but the last FIN (if not yet sent).
		pr.a.Close()
		pr.b.Close()
	}
	return ru.n, rd.n, err
}

// pipe copies src to dst. At EOF it shuts down writing on dst; on an error
// it aborts the pair, which also ends the other direction.
func (pr *pair) pipe(dst, src net.Conn) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	// Hide ReadFrom/WriteTo so that every direction uses our buffer.
	n, err := io.CopyBuffer(struct{ io.Writer }{dst}, activityReader{src, pr}, *bp)
	if err == nil {
		err = closeWrite(dst)
	}
	if err != nil {
		pr.abort()
		if errors.Is(err, net.ErrClosed) {
			// Closed under us by abort (the other direction failed, or
			// the grace period ended): not this direction's error.
			return n, nil
		}
		return n, err
	}
	return n, nil
}

func closeWrite(c net.Conn) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return c.Close()
	}
	err := cw.CloseWrite()
	if errors.Is(err, syscall.ENOTCONN) {
		// The TCP peer is gone already; the other direction will tell.
		return nil
	}
	return err
}
