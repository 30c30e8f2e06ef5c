package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/statsock"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/internal/ucxconf"
	"github.com/ucxnet/ucxnet/registry"
)

// Transport is a set of UCX workers (Config.Workers), each with its
// progress engine, and the conns and listeners that use them. A process
// may run several; the package-level Dial and Listen use a default one
// created on first use. Two Transports in one process talk over real UCX
// transports (shared memory, TCP, ...), not UCX's in-worker loopback.
type Transport struct {
	cfg    Config
	reg    registry.Registry
	ownReg bool // reg was opened by NewTransport: Close closes it
	name   string

	// shards are the engines and what belongs to each (shard.go); eng is
	// shards[0].eng, the worker whose address listeners publish.
	shards     []*shard
	eng        engine.Engine
	nextDial   atomic.Uint32 // round-robin over shards (dialShard)
	nextAccept atomic.Uint32 // round-robin over shards (acceptShard)

	shmFrame int // frame payload that fits one shared-memory segment
	tcpFrame int // frame payload that fits one TCP receive segment
	// holdMin is the smallest payload whose receive buffer (a UCX
	// descriptor, or a pooled copy) a conn holds until Read; smaller ones
	// are copied to Go memory and coalesced. Half a shared-memory frame:
	// a held descriptor is a whole segment, so holding smaller payloads
	// would let a window of them pin many times the window in shared
	// memory (4 KiB writes on 16 conns grew UCX's pool past 500 MB).
	holdMin int

	readBufs BufPool // recycled read buffers of capacity holdMin (small payloads are coalesced into them)

	mu        sync.RWMutex // guards conns, accepted, lingering, listeners, closed and the shards' peer tables
	conns     map[uint64]*Conn
	accepted  map[dialKey]*connectOf // the CONNECTs of accepted conns, by the dialer's conn they name (resend.go)
	lingering int                    // accepted's entries whose conn left, kept for a late repeat
	listeners map[string]*Listener
	closed    bool
	closing   chan struct{}
	admit     admission       // endpoints made from CONNECTs' addresses (admit.go)
	flooded   floodList       // peers failed for flooding, whose CONNECTs are dropped (ingress.go)
	hsBudget  handshakeBudget // CONNECTs to keyed listeners before any proof (hsbudget.go)

	outBufs BufPool // recycled open-frame buffers (coalesce.go)

	opMu  sync.Mutex
	opSeq uint64
	ops   map[uint64]chan error // flushes and zero-copy sends UCX has not finished, by token

	stats    counters
	statsSrv *statsock.Server // the stats socket (statsock.go); nil: none
	logLimit LogLimiter       // Config.Logger records a peer's input causes (logger.go)
	lanes    laneConns        // conns on the kernel-TCP lane (tcpconn.go)

	kc chans // kernel channels to Transports on this host (kchan.go)
	// stripShm removes shared-memory interfaces from an address no
	// channel vouches for: stripSharedMemory on UCX, noStrip on engines
	// without shared memory (tests may replace it before the first
	// endpoint).
	stripShm func([]byte) ([]byte, error)
}

// StartUCX starts a transport's engine on UCX (the UCX that SetUCX
// installed): a UCP context, a worker and its progress engine. In a build
// without UCX it starts noUCX, which runs the kernel-TCP lane alone,
// unless the lane is forced to UCX.
func StartUCX(cfg Config, h engine.Handler) (engine.Engine, error) {
	eng, err := startUCX(cfg, h)
	if err != nil && errors.Is(err, ucx.Unsupported) {
		return startNoUCX(cfg, err) // kernel TCP only (noucx.go)
	}
	if err != nil {
		hint := ""
		if tls, set := ucxconf.EffectiveTLS(cfg.UCX); set {
			hint = fmt.Sprintf(" (UCX_TLS=%q: no usable transport?)", tls)
		}
		return nil, fmt.Errorf("ucxnet: starting UCX%s: %w", hint, err)
	}
	return eng, nil
}

// StartEngine starts an engine a transport runs on, delivering to h.
type StartEngine func(cfg Config, h engine.Handler) (engine.Engine, error)

// NewTransport starts a transport, Config.Workers workers, on the engines
// start makes: UCX ones (StartUCX), or in-memory ones in tests.
func NewTransport(cfg Config, start StartEngine) (*Transport, error) {
	if err := checkLane(cfg.Lane); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	reg, ownReg := cfg.Registry, false
	if reg == nil {
		var err error
		if reg, err = registry.FromEnv(); err != nil {
			return nil, err
		}
		ownReg = true
	}
	t := &Transport{
		cfg:       cfg,
		reg:       reg,
		ownReg:    ownReg,
		name:      cfg.Name,
		shmFrame:  ucxconf.Shm.Frame(cfg.UCX),
		tcpFrame:  ucxconf.TCP.Frame(cfg.UCX),
		conns:     make(map[uint64]*Conn),
		accepted:  make(map[dialKey]*connectOf),
		listeners: make(map[string]*Listener),
		closing:   make(chan struct{}),
		ops:       make(map[uint64]chan error),
		readBufs:  BufPool{Max: maxFreeBufs},
		outBufs:   BufPool{Max: maxOutBufs},
		stripShm:  noStrip,
	}
	t.holdMin = min(16<<10, t.shmFrame/2)
	if err := t.startShards(cfg, start); err != nil {
		if ownReg {
			closeRegistry(reg)
		}
		return nil, err
	}
	t.markUCXFDs() // the worker's sockets and epoll instances
	if isUCX(t.eng) {
		t.stripShm = stripSharedMemory
		t.startChans()
	}
	t.serveStats()
	addLive(t)
	return t, nil
}

// closeRegistry closes a registry backend that owns resources.
func closeRegistry(r registry.Registry) error {
	if c, ok := r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

var (
	defaultOnce sync.Once
	defaultT    *Transport
	defaultErr  error
)

// DefaultTransport returns the process-wide transport that the
// package-level functions use, starting it on first use.
func DefaultTransport() (*Transport, error) {
	defaultOnce.Do(func() { defaultT, defaultErr = NewTransport(Config{}, StartUCX) })
	return defaultT, defaultErr
}

// Name returns the transport's display name.
func (t *Transport) Name() string { return t.name }

// Registry returns the registry the transport publishes to and resolves in.
func (t *Transport) Registry() registry.Registry { return t.reg }

// Close closes the transport's listeners, resets its conns (their peers see
// ECONNRESET), closes its endpoints and stops UCX. Close of the default
// transport is allowed but makes the package-level functions fail.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return net.ErrClosed
	}
	t.closed = true
	close(t.closing)
	srv := t.statsSrv
	ls := make([]*Listener, 0, len(t.listeners))
	for _, l := range t.listeners {
		ls = append(ls, l)
	}
	t.mu.Unlock()
	srv.Close()
	removeLive(t)
	for _, l := range ls {
		l.Close()
	}
	t.lanes.closeAll()
	t.mu.Lock()
	conns := make([]*Conn, 0, len(t.conns))
	for _, c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		closed := c.state.Closed
		c.mu.Unlock()
		if closed {
			// Closed cleanly (FIN sent), waiting for the peer's FIN:
			// nothing to tell the peer.
			c.terminate(ErrTransportClosed, EndQuiet)
			continue
		}
		c.terminate(ErrTransportClosed, EndReset(stream.RstShutdown, RSTIfOpen))
	}
	t.mu.Lock()
	peers := t.allPeersLocked()
	t.mu.Unlock()
	// Let what was sent reach the transport (bounded by Linger), then
	// force the endpoints closed: a flush close to a dead peer could wait
	// for its failure to be detected.
	if t.cfg.Linger > 0 {
		var wg sync.WaitGroup
		for _, p := range peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = t.flushWithin(p, t.cfg.Linger)
			}()
		}
		wg.Wait()
	}
	for _, p := range peers {
		t.closePeer(p, true)
	}
	// The conns' FINs and RSTs went out: the peers read this close as
	// one, not as an exit (kchan.go).
	t.closeChans()
	err := t.closeEngines()
	if t.ownReg {
		if rerr := closeRegistry(t.reg); err == nil {
			err = rerr
		}
	}
	// Force-closing the endpoints normally ends every send (UCX reports
	// them canceled). If UCX still held some, the engine leaked the worker
	// and nothing will progress it again, so UCX will not touch those
	// writers' buffers any more either: end their waits.
	t.failOps(errEngineClosed)
	return err
}

func (t *Transport) isClosed() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.closed
}

// addConnLocked registers a conn with a fresh random id. t.mu is held.
func (t *Transport) addConnLocked(c *Conn) {
	heldW(&t.mu, "addConnLocked needs Transport.mu")
	for {
		id := rand.Uint64()
		if id == 0 {
			continue
		}
		if _, dup := t.conns[id]; dup {
			continue
		}
		c.id = id
		c.laddr.ID = id // before c is in the table (Conns reads it)
		if c.dialed {
			c.laddr.Name = t.name
		}
		t.conns[id] = c
		t.joinPeerLocked(c)
		return
	}
}

// joinPeerLocked puts c, which has its id, on c.peer()'s conns. t.mu is held.
func (t *Transport) joinPeerLocked(c *Conn) {
	heldW(&t.mu, "joinPeerLocked needs Transport.mu")
	p := c.peer()
	if len(p.conns) == 0 {
		// Its silence while it had no conns says nothing: the
		// keepalive clock starts now.
		p.lastRecv.Store(time.Now().UnixNano())
	}
	p.conns[c.id] = c
	p.hadConns = true
	if c.dialed {
		p.dialed++
	}
	p.ka = p.ka.tightest(c.keepAlive)
}

// leavePeerLocked takes c off c.peer()'s conns. t.mu is held.
func (t *Transport) leavePeerLocked(c *Conn) {
	heldW(&t.mu, "leavePeerLocked needs Transport.mu")
	p := c.peer()
	if p == nil || p.conns[c.id] != c {
		return
	}
	delete(p.conns, c.id)
	if c.dialed {
		p.dialed--
	}
	if len(p.conns) == 0 {
		p.idleSince = time.Now()
		p.ka = KeepAlive{}
	}
}

// closeEngines stops every engine, giving each what it still owns up to
// 5 s (together) to finish.
func (t *Transport) closeEngines() error {
	errs := make([]error, len(t.shards))
	var wg sync.WaitGroup
	for i, s := range t.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.eng.Close(5 * time.Second)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (t *Transport) lookup(id uint64) *Conn {
	t.mu.RLock()
	c := t.conns[id]
	t.mu.RUnlock()
	return c
}

func (t *Transport) removeConn(c *Conn) {
	t.mu.Lock()
	if t.conns[c.id] == c {
		delete(t.conns, c.id)
	}
	t.forgetConnectLocked(c)
	t.leavePeerLocked(c)
	t.mu.Unlock()
}

// resolve finds the registry entry for a dialed name: an instance name, or
// a service name (one live instance at random), or — for "host:port", as
// net/http dials — the same for the host part.
func (t *Transport) resolve(ctx context.Context, name string) (registry.Entry, error) {
	try := func(n string) (registry.Entry, error) {
		e, err := t.reg.Resolve(ctx, n)
		if err == nil || !errors.Is(err, registry.ErrNotFound) {
			return e, err
		}
		insts, ierr := t.reg.Instances(ctx, n)
		if ierr == nil && len(insts) > 0 {
			return insts[rand.IntN(len(insts))], nil
		}
		return e, err
	}
	e, err := try(name)
	if err != nil && errors.Is(err, registry.ErrNotFound) {
		if host, _, serr := net.SplitHostPort(name); serr == nil && host != "" {
			if e2, err2 := try(host); err2 == nil {
				return e2, nil
			}
		}
	}
	if err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return e, withDetail(ErrRefused, "no listener named %q in %s (%v)", name, t.reg, err)
		}
		return e, err
	}
	return e, nil
}
