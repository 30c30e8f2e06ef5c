package session

// Workers per core (Config.Workers): a Transport runs N engines, each a
// UCX worker with a progress goroutine of its own, and shards its conns
// across them, so that receiving is not serialized on one goroutine.
//
// A dial picks shard k round-robin; its CONNECT goes from worker k to the
// listener's published worker (shard 0's) and carries worker k's address
// and stream.FeatureWorkers. A listener with N > 1 that gets such a
// CONNECT picks shard j round-robin, makes its endpoint from j to the
// dialer's worker k and answers from there, its ACCEPT carrying the
// feature and worker j's address; the dialer binds the conn to worker j
// (rebindAccept). A CONNECT without the feature is answered from the
// worker it arrived on, and an ACCEPT without it leaves the dialer's conn
// where its CONNECT went: peers that do not know the feature (and
// transports with N = 1, which neither send nor honour it) keep all of a
// conn on the worker they know.
//
// Each shard owns its peers (endpoints belong to one worker), its
// keepalive sweep (it runs on that worker's goroutine), the admission of
// endpoints made from the CONNECTs that arrived on it, its queue of open
// frames (sent by whoever holds its worker), and the bounds on what its
// worker holds. The conn table and the listeners stay per
// Transport.

import (
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// maxWorkers bounds Config.Workers.
const maxWorkers = 64

// envWorkers names the environment variable that sets Config.Workers'
// default (a positive number).
const envWorkers = "UCXNET_WORKERS"

// defaultWorkers is Config.Workers' default for a machine of cpus CPUs:
// one below 8; from 8 on, half the CPUs, at most 8. A worker's goroutine
// receives for its conns at up to one core; the other half is left to the
// application's readers and writers, which copy the same bytes once more,
// and to the peer when it runs on the same host. Below 8 CPUs a second
// worker would compete for the cores the copies need. More than 8 would
// split 16 streams finer than two per worker, for goroutines that then
// mostly sleep.
func defaultWorkers(cpus int) int {
	if cpus < 8 {
		return 1
	}
	return min(cpus/2, 8)
}

// workersDefault is defaultWorkers for this machine.
func workersDefault() int { return defaultWorkers(runtime.NumCPU()) }

// shard is one of a Transport's engines and the state that belongs to it
// (see above). Its peer tables and admission state are under
// Transport.mu, like the conn table they point into.
type shard struct {
	t   *Transport
	idx int // its place in Transport.shards
	eng engine.Engine

	peers       map[string]*peer // by packed worker address
	peersByEP   map[engine.EP]*peer
	peersByFrom map[uintptr]*peer // by the From of their frames, for frames that name no conn of ours (strayFrame)
	// madeBy finds a peer made from a CONNECT that arrived here by the
	// From that CONNECT came from (admit.go).
	madeBy map[uintptr]*peer

	// conns are the conns of the transport's table that are on this
	// shard, by id: what its engine goroutine looks a frame's conn up in,
	// with no lock that the other shards take. Written under
	// Transport.mu and connsMu, read under connsMu.
	connsMu sync.RWMutex
	conns   map[uint64]*Conn

	sweep sweep // the keepalive sweep (sweep.go)

	owner owner // the goroutine in its handler, for the ownership checks (owner.go)

	out outQueue // open frames waiting for this worker (coalesce.go)

	gone goneQueue // peers whose process exited, to fail (kchan.go)
}

func newShard(t *Transport, idx int) *shard {
	s := &shard{
		t:           t,
		idx:         idx,
		peers:       make(map[string]*peer),
		peersByEP:   make(map[engine.EP]*peer),
		peersByFrom: make(map[uintptr]*peer),
		conns:       make(map[uint64]*Conn),
	}
	s.sweep.sh = s
	return s
}

// startShards starts cfg.Workers engines on start, each delivering to its
// own shard; a transport without UCX runs one. On error it closes those
// it started.
func (t *Transport) startShards(cfg Config) error {
	for i := range cfg.Workers {
		s := newShard(t, i)
		eng, err := t.ucx.start(cfg, engineHandler{s})
		if err != nil {
			for _, o := range t.shards {
				_ = o.eng.Close(0)
			}
			t.shards = nil
			return err
		}
		s.eng = eng
		t.shards = append(t.shards, s)
		if _, none := eng.(noUCX); none {
			break // kernel TCP only: no worker to shard over
		}
	}
	t.eng = t.shards[0].eng
	return nil
}

// multi reports whether t runs more than one worker, and so offers and
// honours stream.FeatureWorkers.
func (t *Transport) multi() bool { return len(t.shards) > 1 }

// dialShard picks the shard for a new dial: round-robin.
func (t *Transport) dialShard() *shard {
	return t.shards[int(t.nextDial.Add(1)%uint32(len(t.shards)))]
}

// acceptShard picks the shard for the conn a CONNECT asks for, which
// arrived on at: round-robin if both sides run several workers, else at.
func (t *Transport) acceptShard(at *shard, hello *stream.Hello) *shard {
	if !t.multi() || hello.Features&stream.FeatureWorkers == 0 {
		return at
	}
	return t.shards[int(t.nextAccept.Add(1)%uint32(len(t.shards)))]
}

// engineStats adds up the engines' counters.
func (t *Transport) engineStats() engine.Stats {
	var sum engine.Stats
	for _, s := range t.shards {
		es := s.eng.Stats(engine.EP{})
		sum.Backlog += es.Backlog
		sum.Inflight += es.Inflight
		sum.ZCFrames += es.ZCFrames
		sum.ImmSends += es.ImmSends
		sum.Wakeups += es.Wakeups
		sum.Batches += es.Batches
	}
	return sum
}

// allPeersLocked lists the peers of every shard. t.mu is held.
func (t *Transport) allPeersLocked() []*peer {
	held(&t.mu, "allPeersLocked needs Transport.mu")
	var ps []*peer
	for _, s := range t.shards {
		for _, p := range s.peers {
			ps = append(ps, p)
		}
	}
	return ps
}

// Why an ACCEPT's worker address is refused (rebindAccept).
var (
	errAcceptNoAddr = errors.New("it names no worker address")
	errAcceptClaim  = errors.New("it names the worker of a peer with conns whose frames come from another endpoint")
)

// rebindAccept moves c, a dialed conn of s whose ACCEPT (from the endpoint
// from, on s) said stream.FeatureWorkers, to the peer for the
// listener's worker that the ACCEPT names, making its endpoint if need
// be. The address is refused if it is empty or claimed (a peer of c's
// shard with other bound conns has it and its frames come from elsewhere: binding
// would make the sender stand for that peer, claimedLocked); the engine
// validates a new one before UCX sees it. c.mu is not held.
func (s *shard) rebindAccept(c *Conn, addr []byte, from uintptr) error {
	if len(addr) == 0 {
		return errAcceptNoAddr
	}
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	p := s.peers[string(addr)]
	if claimedLocked(p, from, c) {
		return errAcceptClaim
	}
	if p == nil || p.staleLocked(time.Now()) {
		var err error
		if p, err = s.peerForLocked(addr, true, nil, 0); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p == c.peer() || c.state.Phase != PhaseDialing && c.state.Phase != PhaseAbandoned || t.conns[c.id] != c {
		return nil
	}
	// The CONNECT's peer keeps its idleSince: a dial passing through it
	// says nothing of its other end (the listener's worker may have
	// closed its end, idle, meanwhile).
	old := c.peer()
	idle := old.idleSince
	t.leavePeerLocked(c)
	if len(old.conns) == 0 {
		old.idleSince = idle
	}
	c.peerAt.Store(p)
	t.joinPeerLocked(c)
	return nil
}

// lookup returns the conn on s whose id is id, nil if none is.
func (s *shard) lookup(id uint64) *Conn {
	s.connsMu.RLock()
	c := s.conns[id]
	s.connsMu.RUnlock()
	return c
}

// learnFrom binds c, an accepted conn, to the endpoint from: that of the
// first frame that names it on its shard, and notes it as its peer's
// (noteFromLocked). Only the worker at the address its CONNECT named got
// c's id (in the ACCEPT, sent through that peer's endpoint), so that frame
// is its; the CONNECT's own sender is not (its address is its word only,
// and with several workers the dialer's frames come to another worker
// than its CONNECT did). Engine goroutine of c's shard.
func (s *shard) learnFrom(c *Conn, from uintptr) {
	s.owner.check()
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.hs.connect != nil {
		c.hs.connect.bound = true
	}
	c.mu.Lock()
	c.from = from
	c.learnFrom = false
	open := c.state.Phase == PhaseOpen
	c.mu.Unlock()
	if open && c.peer() != nil {
		c.peer().noteFromLocked(c)
	}
}
