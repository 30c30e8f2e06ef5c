package ucxnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/progress"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

// Defaults for Config.
const (
	DefaultEagerMax = 1 << 20 // largest frame payload
	DefaultWindow   = 4 << 20 // per-conn receive window
	DefaultBacklog  = 512     // conns waiting for Accept, per listener
	DefaultSpin     = 50 * time.Microsecond
	DefaultSpinMax  = 500 * time.Microsecond
	DefaultLinger   = 2 * time.Second
	// DefaultKeepAlive is how long a peer with conns may stay silent
	// before it is taken for dead (see Config.KeepAlive).
	DefaultKeepAlive = 1500 * time.Millisecond
)

// ucxDefaults are UCX settings ucxnet changes unless the user set the
// corresponding UCX_* environment variable.
var ucxDefaults = []progress.Setting{
	// Shared memory transports are excluded under peer error handling
	// unless this is set, and ucxnet needs peer error handling.
	{Name: "MM_ERROR_HANDLING", Value: "y"},
	// Receive segments that hold one whole frame (see segments.go).
	{Name: shmSegment.names[0], Value: strconv.Itoa(shmSegment.size)},
	{Name: tcpSegment.names[0], Value: strconv.Itoa(tcpSegment.size)},
	// Detect dead peers in about a second rather than 20 s.
	{Name: "KEEPALIVE_INTERVAL", Value: "1s"},
}

// Config configures a Transport. The zero value is ready to use.
type Config struct {
	// Registry is where listeners publish and dialers resolve names. Nil
	// means the one UCXNET_REGISTRY selects (default: the per-user directory
	// registry).
	Registry registry.Registry
	// EagerMax is the largest frame payload this transport accepts; the
	// frame size of a conn is the smaller of both sides'. Default 1 MiB,
	// at most 16 MiB.
	EagerMax int
	// Window is the per-conn receive window: how many bytes a peer may send
	// that the application has not read yet. Default 4 MiB.
	Window int
	// Backlog bounds the conns a listener holds before Accept takes them;
	// dials beyond it are refused. Default 512.
	Backlog int
	// Spin is how long the progress engine polls after activity before it
	// sleeps: more spin trades CPU for latency. Default: $UCXNET_SPIN if
	// set (a Go duration), else 50 µs; negative (or $UCXNET_SPIN=0) means
	// never spin, SpinMax included.
	Spin time.Duration
	// SpinMax bounds a longer spin after bulk frames (32 KiB or more of
	// payload). When the engine fell asleep after such a frame and the
	// next one came within SpinMax, the spin after bulk frames grows to
	// cover that gap (at least doubling); a longer gap, or none following,
	// halves it, down to Spin. A stream whose frames come a few hundred µs
	// apart then pays the wake-up (80–130 µs on a small VM) about once per
	// burst instead of once per frame, for up to SpinMax of polling per
	// gap; traffic of smaller frames keeps the plain Spin. Default:
	// $UCXNET_SPIN_MAX if set, else 500 µs; negative or at most Spin keeps
	// the spin fixed.
	SpinMax time.Duration
	// UCX holds UCX settings (names without the UCX_ prefix) applied on top
	// of the environment.
	UCX map[string]string
	// Name is this transport's display name (a dialing conn's LocalAddr).
	// Default: a unique name.
	Name string
	// FrameSize is the payload size writes are cut into (at most the
	// smaller EagerMax of both sides, and at most what the peer's UCX
	// receive segments hold, which its handshake says). Zero picks one per
	// peer from the UCX transports in use, so that a frame fits one
	// receive segment: 32 KiB over shared memory, 1 MiB over TCP, 63 KiB
	// over RDMA (see segments.go). $UCXNET_FRAME_SIZE sets it too.
	FrameSize int
	// Linger bounds how long Close waits for UCX to hand the conn's last
	// frames to the transport (like SO_LINGER), so that a process that
	// exits right after Close loses nothing. Default 2 s; negative means
	// Close does not wait.
	Linger time.Duration
	// CopyWrites makes Write copy every frame into C memory before handing
	// it to UCX, as it always does over TCP and RDMA. By default, over
	// shared memory, writes of ZeroCopyMin bytes or more are sent straight
	// from the writer's memory (pinned until UCX is done with it, which
	// Write waits for): one copy less. $UCXNET_COPY_WRITES=1 sets it too.
	CopyWrites bool
	// KeepAlive is how long a peer that this transport has conns with may
	// stay silent before it is taken for dead: its conns then fail with
	// ECONNRESET (blocked Reads and Writes included), and a dial it does
	// not answer within KeepAlive fails with ECONNREFUSED. A peer that has
	// been silent for a third of it is probed with a PING, once per peer
	// (not per conn), which its progress engine answers whatever its
	// application is doing. UCX's own keepalive misses some deaths: over
	// shared memory a killed peer that its parent has not reaped yet (a
	// zombie) counts as alive. Default: $UCXNET_KEEPALIVE if set (a Go
	// duration), else DefaultKeepAlive; negative disables it (then only
	// UCX's detection remains), as with net.Dialer.KeepAlive. A stopped
	// (SIGSTOP) or hung peer process is taken for dead too.
	KeepAlive time.Duration
	// NetDevices restricts the network devices UCX uses (and listens on),
	// as UCX_NET_DEVICES does: for example "lo" or "eth0,mlx5_0:1". By
	// default UCX's tcp transport listens on every interface's address, so
	// a process that listens on a ucxnet name is reachable from every
	// network the host is on. Empty: UCX's default (or $UCX_NET_DEVICES).
	NetDevices string
}

// ZeroCopyMin is the smallest write (or window-limited part of one) that
// is sent straight from the writer's memory. Smaller writes are copied:
// the copy costs less than waiting for UCX to finish the send.
const ZeroCopyMin = 16 << 10

// Transport is one UCX worker with its progress engine, and the conns and
// listeners that use it. A process may run several; the package-level Dial
// and Listen use a default one created on first use. Two Transports in one
// process talk over real UCX transports (shared memory, TCP, ...), not
// UCX's in-worker loopback.
type Transport struct {
	cfg    Config
	reg    registry.Registry
	ownReg bool // reg was opened by NewTransport: Close closes it
	eng    engine.Engine
	name   string

	shmFrame int // frame payload that fits one shared-memory segment
	tcpFrame int // frame payload that fits one TCP receive segment
	// holdMin is the smallest payload whose receive buffer (a UCX
	// descriptor, or a pooled copy) a conn holds until Read; smaller ones
	// are copied to Go memory and coalesced. Half a shared-memory frame:
	// a held descriptor is a whole segment, so holding smaller payloads
	// would let a window of them pin many times the window in shared
	// memory (4 KiB writes on 16 conns grew UCX's pool past 500 MB).
	holdMin int

	bufMu sync.Mutex
	bufs  [][]byte // recycled read buffers of capacity holdMin (small payloads are coalesced into them)

	mu        sync.RWMutex
	conns     map[uint64]*Conn
	peers     map[string]*peer // by packed worker address
	peersByEP map[engine.EP]*peer
	listeners map[string]*Listener
	closed    bool
	closing   chan struct{}
	sweepDone chan struct{} // closed when the keepalive sweep stops

	opMu  sync.Mutex
	opSeq uint64
	ops   map[uint64]chan error // flushes and zero-copy sends UCX has not finished, by token

	stats counters
}

// maxFreeBufs bounds the recycled read buffers a transport keeps.
const maxFreeBufs = 256

// getBuf returns an empty buffer of capacity holdMin for coalescing small
// payloads.
func (t *Transport) getBuf() []byte {
	t.bufMu.Lock()
	if n := len(t.bufs); n > 0 {
		b := t.bufs[n-1]
		t.bufs[n-1] = nil
		t.bufs = t.bufs[:n-1]
		t.bufMu.Unlock()
		return b[:0]
	}
	t.bufMu.Unlock()
	return make([]byte, 0, t.holdMin)
}

// putBuf recycles a read buffer that Read has emptied, if it is one of
// getBuf's (whole: never resliced from the front).
func (t *Transport) putBuf(b []byte) {
	if cap(b) != t.holdMin {
		return
	}
	t.bufMu.Lock()
	if len(t.bufs) < maxFreeBufs {
		t.bufs = append(t.bufs, b[:0])
	}
	t.bufMu.Unlock()
}

// newOp registers a UCX operation (a flush or a zero-copy send) that
// reports its end with an event carrying token.
func (t *Transport) newOp() (token uint64, done <-chan error) {
	ch := make(chan error, 1)
	t.opMu.Lock()
	t.opSeq++
	token = t.opSeq
	t.ops[token] = ch
	t.opMu.Unlock()
	return token, ch
}

// forgetOp drops an operation that will not (or need not) report its end.
func (t *Transport) forgetOp(token uint64) {
	t.opMu.Lock()
	delete(t.ops, token)
	t.opMu.Unlock()
}

// opDone delivers an operation's end (engine goroutine).
func (t *Transport) opDone(token uint64, err error) {
	t.opMu.Lock()
	ch := t.ops[token]
	delete(t.ops, token)
	t.opMu.Unlock()
	if ch != nil {
		ch <- err
	}
}

// failOps ends every operation still registered with st: after the engine
// closed, no event will end them.
func (t *Transport) failOps(err error) {
	t.opMu.Lock()
	ops := t.ops
	t.ops = make(map[uint64]chan error)
	t.opMu.Unlock()
	for _, ch := range ops {
		ch <- err
	}
}

// flush waits until every send issued so far on p's endpoint is handed to
// the transport, or timeout passes.
func (t *Transport) flush(p *peer, timeout time.Duration) error {
	token, ch := t.newOp()
	var done bool
	err := p.use(func(ep engine.EP) (err error) {
		done, err = t.eng.Flush(ep, token)
		return err
	})
	if done || err != nil {
		t.forgetOp(token)
		return err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case st := <-ch:
		if st != nil {
			return withDetail(ErrReset, "flush: %v", st)
		}
		return nil
	case <-timer.C:
		t.forgetOp(token)
		return timeoutError{}
	}
}

// counters are a Transport's statistics.
type counters struct {
	dials, accepts, refused                         atomic.Uint64
	framesIn, bytesIn, framesOut, bytesOut          atomic.Uint64
	badFrames, unknownConn, duplicates, resetsSent  atomic.Uint64
	resetsRecv, protocolResets, peerFailures, conns atomic.Uint64
	authFailures, stalledPeers                      atomic.Uint64
	foreignFrames, pingsSent, keepAliveFailures     atomic.Uint64
	idleClosed                                      atomic.Uint64
}

// Stats are a Transport's counters.
type Stats struct {
	Dials          uint64 // dials started
	Accepts        uint64 // conns accepted into a listener's queue
	Refused        uint64 // CONNECTs refused (no listener, backlog full, failed authentication)
	FramesIn       uint64 // frames received
	BytesIn        uint64 // payload bytes received
	FramesOut      uint64 // data frames sent
	BytesOut       uint64 // payload bytes sent
	BadFrames      uint64 // frames dropped as malformed
	UnknownConn    uint64 // frames for conn ids this transport does not have
	Duplicates     uint64 // duplicate frames dropped
	ResetsSent     uint64 // RST frames sent
	ResetsReceived uint64 // RST frames received
	ProtocolResets uint64 // conns reset because the peer broke the protocol
	PeerFailures   uint64 // endpoints UCX reported as failed
	AuthFailures   uint64 // handshakes refused for a wrong or missing pre-shared key
	OpenConns      uint64 // conns in the conn table now
	Peers          uint64 // endpoints now
	InflightSends  uint64 // sends whose buffers UCX still owns
	ZeroCopyFrames uint64 // data frames sent straight from the writer's memory (see Config.CopyWrites)
	StalledPeers   uint64 // endpoints force-closed because the peer stopped draining a zero-copy send
	// ForeignFrames counts frames dropped because they named a conn but
	// came from another endpoint than the one the conn was made with.
	ForeignFrames     uint64
	PingsSent         uint64 // keepalive probes sent (see Config.KeepAlive)
	KeepAliveFailures uint64 // peers taken for dead because they stayed silent past KeepAlive
	IdlePeersClosed   uint64 // endpoints closed because no conn used them
}

// envDuration is the Go duration in the environment variable name, or dflt
// if it is unset or not a duration.
func envDuration(name string, dflt time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return dflt
}

// NewTransport starts a transport: a UCP context, a worker and its
// progress engine.
func NewTransport(cfg Config) (*Transport, error) {
	return newTransport(cfg, func(cfg Config, h engine.Handler) (engine.Engine, error) {
		eng, err := progress.Start(progress.Config{Settings: ucxSettings(cfg.UCX), Spin: cfg.Spin, SpinMax: cfg.SpinMax}, h)
		if err != nil {
			hint := ""
			if tls, set := os.LookupEnv("UCX_TLS"); set {
				hint = fmt.Sprintf(" (UCX_TLS=%q: no usable transport?)", tls)
			}
			return nil, fmt.Errorf("ucxnet: starting UCX%s: %w", hint, err)
		}
		return eng, nil
	})
}

// startEngine starts the engine a transport runs on, delivering to h.
type startEngine func(cfg Config, h engine.Handler) (engine.Engine, error)

// newTransport starts a transport on the engine start makes: the real
// UCX one (NewTransport), or an in-memory one in tests.
func newTransport(cfg Config, start startEngine) (*Transport, error) {
	if cfg.EagerMax <= 0 {
		cfg.EagerMax = DefaultEagerMax
	}
	if cfg.EagerMax > stream.MaxPayload {
		cfg.EagerMax = stream.MaxPayload
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window > 1<<31-1 {
		cfg.Window = 1<<31 - 1
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = DefaultBacklog
	}
	if cfg.Spin == 0 {
		cfg.Spin = envDuration("UCXNET_SPIN", DefaultSpin)
	}
	if cfg.SpinMax == 0 {
		cfg.SpinMax = envDuration("UCXNET_SPIN_MAX", DefaultSpinMax)
	}
	if cfg.Spin <= 0 {
		cfg.Spin, cfg.SpinMax = 0, 0
	}
	if cfg.Name == "" {
		cfg.Name = registry.UniqueName()
	}
	if cfg.FrameSize <= 0 {
		if v, err := strconv.Atoi(os.Getenv("UCXNET_FRAME_SIZE")); err == nil && v > 0 {
			cfg.FrameSize = v
		}
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = envDuration("UCXNET_KEEPALIVE", DefaultKeepAlive)
	}
	if cfg.NetDevices != "" {
		ucx := make(map[string]string, len(cfg.UCX)+1)
		for k, v := range cfg.UCX {
			ucx[k] = v
		}
		ucx["NET_DEVICES"] = cfg.NetDevices
		cfg.UCX = ucx
	}
	if os.Getenv("UCXNET_COPY_WRITES") == "1" {
		cfg.CopyWrites = true
	}
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
		shmFrame:  shmSegment.frame(cfg.UCX),
		tcpFrame:  tcpSegment.frame(cfg.UCX),
		conns:     make(map[uint64]*Conn),
		peers:     make(map[string]*peer),
		peersByEP: make(map[engine.EP]*peer),
		listeners: make(map[string]*Listener),
		closing:   make(chan struct{}),
		sweepDone: make(chan struct{}),
		ops:       make(map[uint64]chan error),
	}
	t.holdMin = min(16<<10, t.shmFrame/2)
	eng, err := start(cfg, engineHandler{t})
	if err != nil {
		if ownReg {
			closeRegistry(reg)
		}
		return nil, err
	}
	t.eng = eng
	go t.sweep()
	return t, nil
}

// closeRegistry closes a registry backend that owns resources.
func closeRegistry(r registry.Registry) error {
	if c, ok := r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// ucxSettings merges ucxnet's defaults (skipping those the environment
// sets) with the user's settings.
func ucxSettings(user map[string]string) []progress.Setting {
	var out []progress.Setting
	for _, s := range ucxDefaults {
		if _, set := os.LookupEnv("UCX_" + s.Name); set {
			continue
		}
		seg := segmentNamed(s.Name)
		if (s.Name == "MM_ERROR_HANDLING" || seg == &shmSegment) && !sharedMemoryEnabled(os.Getenv("UCX_TLS")) ||
			seg == &tcpSegment && !tcpEnabled(os.Getenv("UCX_TLS")) {
			continue // UCX warns about settings of components it did not load
		}
		if seg != nil && seg.userValue(user) != "" {
			continue // the user chose the segment size (maybe under another name)
		}
		if _, set := user[s.Name]; set {
			continue
		}
		out = append(out, s)
	}
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := k
		if seg := segmentNamed(k); seg != nil {
			// UCX ignores some segment names through ucp_config_modify
			// (see segments.go): pass the one it honours.
			name = seg.names[0]
		}
		out = append(out, progress.Setting{Name: name, Value: user[k]})
	}
	return out
}

// EffectiveUCXDefaults returns the UCX settings ucxnet applies on top of
// the environment (those the environment does not set itself), named as
// UCX_* environment variables that would set them.
func EffectiveUCXDefaults() map[string]string {
	m := map[string]string{}
	for _, s := range ucxSettings(nil) {
		name := s.Name
		if seg := segmentNamed(name); seg != nil {
			name = seg.envName // the name UCX reads from the environment
		}
		m["UCX_"+name] = s.Value
	}
	return m
}

var (
	defaultOnce sync.Once
	defaultT    *Transport
	defaultErr  error
)

// DefaultTransport returns the process-wide transport that the
// package-level functions use, starting it on first use.
func DefaultTransport() (*Transport, error) {
	defaultOnce.Do(func() { defaultT, defaultErr = NewTransport(Config{}) })
	return defaultT, defaultErr
}

// Name returns the transport's display name.
func (t *Transport) Name() string { return t.name }

// Registry returns the registry the transport publishes to and resolves in.
func (t *Transport) Registry() registry.Registry { return t.reg }

// WorkerAddress returns a copy of the packed UCX worker address.
func (t *Transport) WorkerAddress() []byte { return append([]byte(nil), t.eng.Address()...) }

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	t.mu.RLock()
	open, peers := len(t.conns), len(t.peers)
	t.mu.RUnlock()
	es := t.eng.Stats()
	return Stats{
		Dials: s.dials.Load(), Accepts: s.accepts.Load(), Refused: s.refused.Load(),
		FramesIn: s.framesIn.Load(), BytesIn: s.bytesIn.Load(),
		FramesOut: s.framesOut.Load(), BytesOut: s.bytesOut.Load(),
		BadFrames: s.badFrames.Load(), UnknownConn: s.unknownConn.Load(),
		Duplicates: s.duplicates.Load(), ResetsSent: s.resetsSent.Load(),
		ResetsReceived: s.resetsRecv.Load(), ProtocolResets: s.protocolResets.Load(),
		PeerFailures: s.peerFailures.Load(), AuthFailures: s.authFailures.Load(), OpenConns: uint64(open), Peers: uint64(peers),
		InflightSends: es.Inflight, ZeroCopyFrames: es.ZCFrames, StalledPeers: s.stalledPeers.Load(),
		ForeignFrames: s.foreignFrames.Load(), PingsSent: s.pingsSent.Load(),
		KeepAliveFailures: s.keepAliveFailures.Load(), IdlePeersClosed: s.idleClosed.Load(),
	}
}

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
	ls := make([]*Listener, 0, len(t.listeners))
	for _, l := range t.listeners {
		ls = append(ls, l)
	}
	t.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	t.mu.Lock()
	conns := make([]*Conn, 0, len(t.conns))
	for _, c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			// Closed cleanly (FIN sent), waiting for the peer's FIN:
			// nothing to tell the peer.
			c.fail(ErrTransportClosed)
			continue
		}
		c.abort(stream.RstShutdown, ErrTransportClosed, rstIfOpen)
	}
	t.mu.Lock()
	peers := make([]*peer, 0, len(t.peers))
	for _, p := range t.peers {
		peers = append(peers, p)
	}
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
				_ = t.flush(p, t.cfg.Linger)
			}()
		}
		wg.Wait()
	}
	for _, p := range peers {
		t.closePeer(p, true)
	}
	<-t.sweepDone
	err := t.eng.Close(5 * time.Second)
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
	for {
		id := rand.Uint64()
		if id == 0 {
			continue
		}
		if _, dup := t.conns[id]; dup {
			continue
		}
		c.id = id
		t.conns[id] = c
		if len(c.peer.conns) == 0 {
			// Its silence while it had no conns says nothing: the
			// keepalive clock starts now.
			c.peer.lastRecv.Store(time.Now().UnixNano())
		}
		c.peer.conns[id] = c
		c.peer.hadConns = true
		return
	}
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
	if c.peer != nil && c.peer.conns[c.id] == c {
		delete(c.peer.conns, c.id)
		if len(c.peer.conns) == 0 {
			c.peer.idleSince = time.Now()
		}
	}
	t.mu.Unlock()
}

// send sends a header-only frame.
func (t *Transport) sendCtl(p *peer, h stream.Header) error {
	hb := h.Bytes()
	return p.use(func(ep engine.EP) error { return t.eng.Send(ep, hb[:], nil) })
}

// engineHandler receives the engine's event batches for a Transport (an
// unexported type, so that the handler is no part of the public API).
type engineHandler struct{ t *Transport }

// HandleEvents implements progress.Handler. It runs on the engine
// goroutine.
func (h engineHandler) HandleEvents(evs []engine.Event) { h.t.handleEvents(evs) }

func (t *Transport) handleEvents(evs []engine.Event) {
	now := time.Now().UnixNano() // one clock read per batch, for liveness
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case engine.Frame:
			t.handleFrame(ev, now)
		case engine.EPError:
			t.handleEPError(ev.EP, ev.Err)
		case engine.Done:
			t.opDone(ev.Token, ev.Err)
		default:
			t.handleBad(ev)
		}
	}
}

// connFor returns the conn a frame names, if the frame came from the
// endpoint that conn is bound to; frames for unknown conns and frames from
// elsewhere are counted and get nil. A frame that arrives counts as a sign
// of life of the conn's peer.
func (t *Transport) connFor(h stream.Header, from uintptr, now int64) *Conn {
	c := t.lookup(h.ConnID)
	if c == nil {
		t.stats.unknownConn.Add(1)
		return nil
	}
	if c.from != from && !(c.from == 0 && (h.Kind == stream.KindAccept || h.Kind == stream.KindRefuse)) {
		// Before its ACCEPT a dialed conn is bound to nothing: only that
		// answer, from whoever, may bind it (handleHandshake).
		t.stats.foreignFrames.Add(1)
		return nil
	}
	if c.peer != nil {
		c.peer.lastRecv.Store(now)
	}
	return c
}

// handleBad counts a frame UCX delivered but the C side could not take (a
// rendezvous offer, an oversized header, or no memory for a copy). If it
// was part of a conn's stream, that stream now has a gap that will never
// fill: reset the conn rather than let it stall.
func (t *Transport) handleBad(ev *engine.Event) {
	t.stats.badFrames.Add(1)
	h, err := stream.DecodeHeader(ev.Header())
	if err != nil || (h.Kind != stream.KindData && h.Kind != stream.KindFin) {
		return
	}
	if c := t.lookup(h.ConnID); c != nil && c.from == ev.From {
		t.stats.protocolResets.Add(1)
		c.abort(stream.RstProtocol, withDetail(ErrReset, "frame %d could not be received", h.Seq), rstIfOpen)
	}
}

func (t *Transport) handleFrame(ev *engine.Event, now int64) {
	t.stats.framesIn.Add(1)
	h, err := stream.DecodeHeader(ev.Header())
	if err != nil {
		t.stats.badFrames.Add(1)
		return
	}
	if ev.DataLen != len(ev.Data) {
		err = fmt.Errorf("payload of %d bytes arrived as %d", ev.DataLen, len(ev.Data))
	}
	if err == nil {
		err = h.Validate(len(ev.Data), t.cfg.EagerMax)
	}
	if err != nil {
		t.stats.badFrames.Add(1)
		if h.ConnID != 0 && h.Kind != stream.KindConnect {
			if c := t.lookup(h.ConnID); c != nil && c.from == ev.From {
				t.stats.protocolResets.Add(1)
				c.abort(stream.RstProtocol, withDetail(ErrProtocol, "%v", err), rstIfOpen)
			}
		}
		return
	}
	t.stats.bytesIn.Add(uint64(len(ev.Data)))
	if h.Kind == stream.KindConnect {
		t.handleConnect(ev.Data, ev.From)
		return
	}
	if c := t.lookup(h.ConnID); c != nil && c.from == 0 && ev.From != 0 && c.stashEarly(h, ev) {
		return // arrived before the ACCEPT that says where it may come from
	}
	c := t.connFor(h, ev.From, now)
	if c == nil {
		return
	}
	switch h.Kind {
	case stream.KindAccept, stream.KindRefuse:
		c.handleHandshake(h, ev.Data, ev.From)
		c.replayEarly()
	case stream.KindAuth:
		c.handleAuth(h, ev.Data)
	default:
		c.handleFrame(h, ev)
	}
}

// errEngineClosed ends the operations still waiting when the engine is
// gone.
var errEngineClosed = errors.New("ucxnet: engine closed with the operation unfinished")

// endpointWhy is the reason an endpoint failure gives its conns.
func endpointWhy(err error) string {
	if err == nil {
		return "endpoint failed"
	}
	s := err.Error()
	if rest, ok := strings.CutPrefix(s, "ucx: endpoint: "); ok {
		return rest
	}
	return s
}

// handleEPError fails every conn on a failed endpoint and closes it.
func (t *Transport) handleEPError(ep engine.EP, why error) {
	t.stats.peerFailures.Add(1)
	t.mu.Lock()
	p := t.peersByEP[ep]
	t.mu.Unlock()
	if p == nil {
		// Already closed by us: UCX reports the failure of an endpoint
		// being closed; nothing is left to do.
		return
	}
	t.failPeer(p, endpointWhy(why))
}

// failPeer fails every conn to p and force-closes p's endpoint, which
// cancels what UCX still has queued on it.
func (t *Transport) failPeer(p *peer, why string) { t.failPeerClose(p, why, true) }

// failPeerClose fails every conn to p and closes p's endpoint, forced or
// not.
func (t *Transport) failPeerClose(p *peer, why string, force bool) {
	t.mu.Lock()
	conns := make([]*Conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.peerFailed(why)
	}
	t.closePeer(p, force)
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
