package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/smfifo"
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
	ucx    UCXBinding      // what it uses of UCX, handed in by the face
	lib    UCXLibrary      // ucx.Library(), read once
	smw    *smfifo.Watcher // the process's shared-memory FIFO watcher (watch.go)
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

	outBufs frameBufs // recycled open-frame buffers (coalesce.go)

	ops opTable // flushes and zero-copy sends UCX has not finished (ops.go)

	stats    counters
	statsSrv *statsock.Server // the stats socket (statsock.go); nil: none
	log      eventLog         // Config.Logger's records (logger.go)
	lanes    laneConns        // conns on the kernel-TCP lane (tcpconn.go)
	policy   lanePolicy       // which lane a dial takes (lane.go)

	kc chans // kernel channels to Transports on this host (kchan.go)
	// stripShm removes shared-memory interfaces from an address no
	// channel vouches for: ucx.stripSharedMemory on UCX, noStrip on engines
	// without shared memory (tests may replace it before the first
	// endpoint).
	stripShm func([]byte) ([]byte, error)
}

// StartEngine starts an engine a transport runs on, delivering to h.
type StartEngine func(cfg Config, h engine.Handler) (engine.Engine, error)

// NewTransport starts a transport, Config.Workers workers, on the engines
// ucx starts: UCX ones (the face's binding over internal/progress), or
// in-memory ones in tests.
func NewTransport(cfg Config, ucx UCXBinding) (*Transport, error) {
	if err := ucx.check(); err != nil {
		return nil, err
	}
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
		ucx:       ucx,
		lib:       ucx.Library(),
		reg:       reg,
		ownReg:    ownReg,
		name:      cfg.Name,
		shmFrame:  ucxconf.Shm.Frame(cfg.UCX),
		tcpFrame:  ucxconf.TCP.Frame(cfg.UCX),
		conns:     make(map[uint64]*Conn),
		accepted:  make(map[dialKey]*connectOf),
		listeners: make(map[string]*Listener),
		closing:   make(chan struct{}),
		ops:       opTable{ops: make(map[uint64]chan error)},
		readBufs:  BufPool{Max: maxFreeBufs},
		outBufs:   frameBufs{BufPool{Max: maxOutBufs}},
		stripShm:  noStrip,
	}
	t.kc.t = t
	t.log = eventLog{lg: cfg.Logger, name: cfg.Name, stats: &t.stats}
	t.holdMin = min(16<<10, t.shmFrame/2)
	t.smw = smWatch(t.lib.Version)
	if err := t.startShards(cfg); err != nil {
		if ownReg {
			closeRegistry(reg)
		}
		return nil, err
	}
	t.policy = lanePolicy{cfg: cfg, eng: t.eng, ucx: ucx, lib: t.lib, reg: reg}
	t.markUCXFDs() // the worker's sockets and epoll instances
	if t.ucx.IsUCX(t.eng) {
		t.stripShm = t.ucx.stripSharedMemory
		t.kc.start()
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
				_ = p.flushWithin(t.cfg.Linger)
			}()
		}
		wg.Wait()
	}
	for _, p := range peers {
		p.close(true)
	}
	// The conns' FINs and RSTs went out: the peers read this close as
	// one, not as an exit (kchan.go).
	t.kc.close()
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
	t.ops.failAll(errEngineClosed)
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
		c.sh.connsMu.Lock()
		c.sh.conns[id] = c
		c.sh.connsMu.Unlock()
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
		c.sh.connsMu.Lock()
		delete(c.sh.conns, c.id)
		c.sh.connsMu.Unlock()
	}
	c.hs.forgetConnectLocked()
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

// idlePeersLocked counts the endpoints without conns, on every shard.
// t.mu is held.
func (t *Transport) idlePeersLocked() int {
	held(&t.mu, "idlePeersLocked needs Transport.mu")
	n := 0
	for _, s := range t.shards {
		for _, p := range s.peers {
			if len(p.conns) == 0 {
				n++
			}
		}
	}
	return n
}

// attach gives c a fresh id and puts it in the conn table, on the peer of
// c's shard for addr (created if need be), in one step: the idle sweep
// cannot close that peer's endpoint in between. For an accepted conn
// (dial = false), at and from are where its CONNECT came from.
func (t *Transport) attach(addr []byte, c *Conn, dial bool, at *shard, from uintptr) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !dial && claimedLocked(at.peers[string(addr)], from, nil) {
		// A CONNECT that names the worker address of a peer with conns
		// whose frames come from another endpoint: a claim (the address
		// is public, in the registry), not that peer.
		return errClaimedAddr
	}
	p, err := c.sh.peerForLocked(addr, dial, at, from)
	if err != nil {
		return err
	}
	c.peerAt.Store(p)
	c.dialed = dial
	t.addConnLocked(c)
	return nil
}

// repeatedConnect reports whether a CONNECT with hello, its payload,
// repeats one that made a conn (again), and that conn if it is still in
// the conn table. A CONNECT that names a dialer's conn already accepted
// with another Hello is not its dialer's (which sends the same one each
// time): it is dropped and counted as bad.
func (t *Transport) repeatedConnect(hello stream.Hello, payload []byte) (c *Conn, again bool) {
	var p *peer
	var refused stream.RefuseCode
	t.mu.RLock()
	k := t.accepted[dialKey{string(hello.WorkerAddr), hello.ConnID}]
	if k != nil {
		c, p, refused = k.c, k.p, k.refused
	}
	t.mu.RUnlock()
	if k == nil {
		return nil, false
	}
	if k.sum != sha256.Sum256(payload) {
		t.log.badFrame()
		t.log.hostile("ucxnet: dropped a CONNECT naming a dialer's conn already accepted, with another Hello")
		return nil, true
	}
	if c == nil && refused != 0 {
		p.refuse(hello.ConnID, refused)
	}
	return c, true
}

// releasePair names the listener's UCX release (from its registry entry,
// or the address) and this process's, when they differ: for the errors of
// a dial that failed, so that a mixed pair says which two releases met.
func (t *Transport) releasePair(e registry.Entry) string {
	theirs := e.Meta[MetaUCXRelease]
	if theirs == "" {
		theirs = t.ucx.AddressRelease(e.Address)
	}
	ours := t.lib.Version
	if theirs == "" || ours == "" || theirs == ours {
		return ""
	}
	return fmt.Sprintf(" (the listener runs UCX %s, this process UCX %s)", theirs, ours)
}

// markUCXFDs has UCX's new descriptors marked close-on-exec if t runs UCX:
// after its worker is made, an endpoint is created, or a peer's handshake
// arrived (UCX accepted its connection).
func (t *Transport) markUCXFDs() {
	if t.ucx.IsUCX(t.eng) {
		fdSweep.Request()
	}
}

// sweepUCXFDs marks close-on-exec, at once, every descriptor UCX has made
// so far, if t runs UCX: Dial and Accept call it before they return a
// conn over UCX, so that a child the application execs next inherits
// none of the descriptors that existed then.
func (t *Transport) sweepUCXFDs() {
	if t.ucx.IsUCX(t.eng) {
		fdSweep.Sweep()
	}
}
