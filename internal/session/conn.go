package session

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/deadline"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Conn is a UCX stream: a byte stream carried as UCX active messages (the
// kernel-TCP lane's is LaneConn). Its Read and Write block until they can
// go on, its read or write deadline passes or the stream closes, and
// return bare errors (io.EOF, net.ErrClosed, os.ErrDeadlineExceeded,
// ErrReset and the other sentinels); the face adds *net.OpError. All
// methods are safe for concurrent use.
type Conn struct {
	t *Transport
	// peerAt is the peer c's frames go to; nil until attached. Written
	// under both Transport.mu and Conn.mu, read by anyone (peer).
	peerAt   atomic.Pointer[peer]
	id       uint64    // our conn id: frames to us carry it
	remoteID uint64    // the peer's conn id: frames we send carry it
	frame    int       // largest frame payload to send (both sides' EagerMax)
	peerSegs SegLimits // largest frames the peer receives as one UCX message
	laddr    Addr
	raddr    Addr
	// keepAlive is how long the conn's peer may stay silent (Dialer and
	// ListenConfig KeepAlive, else Config.KeepAlive; SetKeepAlive): set
	// before the conn enters the conn table, then under Transport.mu.
	keepAlive KeepAlive
	dialed    bool // made by Dial (set under Transport.mu when attached)
	// sh is the shard the conn is on: its frames come and go through that
	// shard's engine. Set before the conn is in the conn table.
	sh *shard
	// from identifies the UCX endpoint the peer's frames for this conn
	// come from (engine.Event.From), learnt from its ACCEPT (dialed) or
	// the first frame for it (accepted); frames from anywhere else are
	// dropped. Engine goroutine of sh only.
	from uintptr
	// learnFrom: an accepted conn not bound yet; the first frame for it
	// sets from (shard.learnFrom). Engine goroutine of sh only, as is
	// unboundProbed: the keepalive sweep sent it a PING of its own while
	// unbound (unbound.go).
	learnFrom, unboundProbed bool
	hs                       handshake // its opening (handshake.go)

	mu    sync.Mutex
	state State   // its phase and which halves are shut
	in    Inbound // what arrived and is not read yet, and the receive window
	rerr  error   // reset / failure, reported after buffered data
	// lost: data that arrived was dropped unread (a reset, Transport.Close),
	// so a FIN after it is no end of stream: Read returns rerr, not io.EOF.
	lost   bool
	rwait  int // readers waiting
	rcond  chan struct{}
	swin   stream.SendWindow
	werr   error
	wwait  int
	wcond  chan struct{}
	dErr   error
	linger time.Duration // SetLinger: < 0 the transport's Linger, 0 reset on Close

	closedCh chan struct{} // closed by Close
	failedCh chan struct{} // closed when the conn fails or is reset (terminate)
	wmu      sync.Mutex    // serializes writers and the FIN after them
	seq      uint64        // next sequence number to send (under wmu)
	out      Cork          // small writes queued while the engine was busy
	// laneWhy says why the UCX lane was chosen (Lane).
	laneWhy   string
	deadlines // Read's and Write's

	// dataHdr is the DATA header Write hands the engine (under wmu): a
	// field, not a local, so that it costs no allocation per write.
	dataHdr [stream.HeaderLen]byte

	cnt  connCounters // Stats
	born time.Time    // when the conn was made (Stats)
}

// newConn returns a conn to p (nil: attached later) with a receive window
// of window bytes.
func newConn(t *Transport, p *peer, laddr, raddr Addr, window int) *Conn {
	c := &Conn{
		t:         t,
		sh:        t.shards[0],
		frame:     t.cfg.EagerMax,
		peerSegs:  PeerSegLimits(stream.Hello{}), // until the peer's Hello says more
		laddr:     laddr,
		raddr:     raddr,
		in:        NewInbound(uint32(min(window, t.cfg.Window)), t.holdMin, &t.readBufs),
		rcond:     make(chan struct{}),
		wcond:     make(chan struct{}),
		swin:      stream.NewSendWindow(0),
		closedCh:  make(chan struct{}),
		failedCh:  make(chan struct{}),
		linger:    -1,
		keepAlive: keepAliveOf(t.cfg.KeepAlive),
		born:      time.Now(),
	}
	c.hs = handshake{c: c, dialDone: make(chan struct{})}
	c.deadlines = deadlines{rd: deadline.Make(), wd: deadline.Make(), closed: c.closedCh}
	c.peerAt.Store(p)
	return c
}

// peer returns the peer c's frames go to, nil until attached.
func (c *Conn) peer() *peer { return c.peerAt.Load() }

// LocalAddr returns the local address: the listener's name for an accepted
// conn, the transport's name and conn id for a dialed one.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the remote address: the dialed name for a dialed
// conn, the dialer's transport name and conn id for an accepted one.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// Transports returns the UCX transports and devices carrying the conn's
// endpoint, e.g. ["posix/memory", "cma/memory"] or ["tcp/lo"] or
// ["rc_mlx5/mlx5_0:1"]: the answer to "am I on RDMA?".
func (c *Conn) Transports() []string {
	peer := c.peer()
	if p := peer.info.Load(); p != nil {
		return append([]string(nil), (*p)...)
	}
	var tl []string
	_ = peer.use(func(ep engine.EP) error {
		tl = c.sh.eng.Stats(ep).Transports
		return nil
	})
	if tl == nil {
		return nil
	}
	peer.info.Store(&tl)
	return append([]string(nil), tl...)
}

// broadcast wakes every waiter of a condition channel. c.mu is held.
func broadcast(ch *chan struct{}, waiting int) {
	if waiting > 0 {
		close(*ch)
		*ch = make(chan struct{})
	}
}

// waitLocked waits for a broadcast on cond (counted in *waiting), for the
// cancel channel dl (a Read's or Write's) or for c's close. c.mu is held,
// and released while it waits.
func (c *Conn) waitLocked(cond chan struct{}, waiting *int, dl <-chan struct{}) {
	held(&c.mu, "waitLocked needs Conn.mu")
	*waiting++
	c.mu.Unlock()
	select {
	case <-cond:
	case <-dl:
	case <-c.closedCh:
	}
	c.mu.Lock()
	*waiting--
}

// Deadline is a stream Read's or Write's deadline (internal/deadline's
// Deadline): Wait returns a channel that closes when the deadline passes,
// and a new, open one once a passed deadline is moved on. A stream asks
// for the channel each time it checks or waits, so that a deadline moved
// meanwhile counts. Wait must not block: it is called with the stream's
// lock held.
type Deadline interface {
	Wait() <-chan struct{}
}

// deadlines are a UCX stream's read and write deadlines.
type deadlines struct {
	rd, wd deadline.Deadline
	closed <-chan struct{} // the stream's closedCh
}

// SetDeadline sets the read and write deadlines; after Close it fails
// with net.ErrClosed, as *net.TCPConn's does.
func (d *deadlines) SetDeadline(t time.Time) error {
	if deadline.Closed(d.closed) {
		return net.ErrClosed
	}
	d.rd.Set(t)
	d.wd.Set(t)
	return nil
}

// SetReadDeadline sets the read deadline; it also interrupts a Read
// already blocked.
func (d *deadlines) SetReadDeadline(t time.Time) error {
	if deadline.Closed(d.closed) {
		return net.ErrClosed
	}
	d.rd.Set(t)
	return nil
}

// SetWriteDeadline sets the write deadline.
func (d *deadlines) SetWriteDeadline(t time.Time) error {
	if deadline.Closed(d.closed) {
		return net.ErrClosed
	}
	d.wd.Set(t)
	return nil
}

// Read reads data from the stream, waiting until some is there, the read
// deadline passes (os.ErrDeadlineExceeded) or the stream is closed
// (net.ErrClosed). After the peer's Close or CloseWrite and once
// everything it sent is read, Read returns io.EOF.
func (c *Conn) Read(b []byte) (int, error) {
	dl := &c.rd
	c.mu.Lock()
	for {
		if c.state.Closed {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		cancel := dl.Wait()
		if deadline.Closed(cancel) {
			c.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		if c.in.Ready() {
			if len(b) == 0 {
				c.mu.Unlock()
				return 0, nil
			}
			// nil: the engine buffers emptied (held payloads only) are
			// few, and a local array would escape to the heap on every
			// Read through the Release call.
			n, done := c.in.Read(b, nil)
			limit, send := c.in.Consume(n)
			open := c.state.WindowOpen()
			c.mu.Unlock()
			c.sh.eng.Release(done...)
			if send && open {
				c.sendWindow(limit)
			}
			return n, nil
		}
		if c.state.FinIn && !c.lost {
			// Everything the peer sent was read: a failure after its FIN
			// (say, its process exiting) changes nothing for reads.
			c.mu.Unlock()
			return 0, io.EOF
		}
		if c.rerr != nil {
			err := c.rerr
			c.mu.Unlock()
			return 0, err
		}
		if len(b) == 0 {
			c.mu.Unlock()
			return 0, nil
		}
		c.waitLocked(c.rcond, &c.rwait, cancel)
	}
}

// accepted grows an accepted conn's receive window from preAcceptWindow
// to the transport's Window once Accept hands it to the application, and
// marks the descriptors UCX made for it close-on-exec (sweepUCXFDs).
func (c *Conn) accepted() {
	c.t.sweepUCXFDs()
	c.mu.Lock()
	limit, send := c.in.Resize(uint32(c.t.cfg.Window))
	open := c.state.WindowOpen()
	c.mu.Unlock()
	if send && open {
		c.sendWindow(limit)
	}
}

// Closed reports whether Close was called.
func (c *Conn) Closed() bool { return deadline.Closed(c.closedCh) }

// SetLinger sets how Close treats data not yet handed to the transport,
// as (*net.TCPConn).SetLinger does. sec < 0 (the default): Close sends what
// was written, then FIN, waiting up to the Transport's Linger for UCX to
// hand it on. sec == 0: Close discards it and resets the conn — the peer
// sees ECONNRESET, not EOF (a proxy passes on a reset this way). sec > 0:
// as the default, waiting up to sec seconds.
func (c *Conn) SetLinger(sec int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Closed {
		return net.ErrClosed
	}
	switch {
	case sec < 0:
		c.linger = -1
	case sec == 0:
		c.linger = 0
	default:
		c.linger = time.Duration(sec) * time.Second
	}
	return nil
}

// CloseWrite shuts down the writing side: the peer reads what was written,
// then io.EOF. Reading goes on.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.state.Closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.state.WShut = true
	broadcast(&c.wcond, c.wwait)
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendFin()
}

// sendFin sends FIN after all data, once. If a queued frame was lost, it
// resets the conn instead and returns the reset error. c.wmu is held.
func (c *Conn) sendFin() error {
	c.sh.flushOut() // the open frame first: its send must not fail after the FIN went
	if err := c.out.TakeErr(); err != nil {
		c.terminate(err, EndGap) // a queued frame was lost: RST, not FIN after a gap
		c.mu.Lock()
		err = c.werr
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	if c.state.FinOut || c.werr != nil || c.state.Phase != PhaseOpen {
		c.mu.Unlock()
		return nil
	}
	c.state.FinOut = true
	c.mu.Unlock()
	err := c.peer().sendCtl(stream.Header{Kind: stream.KindFin, ConnID: c.remoteID, Seq: c.seq})
	c.seq++
	if err != nil {
		return withDetail(ErrReset, "%v", err)
	}
	return nil
}

// Close closes the conn. Data already written is delivered, then FIN: the
// peer reads everything, then io.EOF. If data the peer sent is still
// unread, or SetLinger(0) was called, the peer is reset instead (as TCP
// does). Blocked Read and Write
// calls return net.ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.state.Closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.state.Closed = true
	unread := c.in.Unread() || c.linger == 0
	linger := c.linger
	if linger < 0 {
		linger = c.t.cfg.Linger
	}
	if !unread {
		c.dropLocked() // nothing to read; release what a failure kept
	}
	c.mu.Unlock()
	close(c.closedCh)

	c.wmu.Lock() // wait for a Write in progress to notice
	defer c.wmu.Unlock()
	if unread {
		c.terminate(net.ErrClosed, EndReset(stream.RstAbort, RSTIfOpen))
		return nil
	}
	err := c.sendFin()
	if err == nil && linger > 0 {
		// Like SO_LINGER: wait (bounded) until UCX has handed what we
		// sent to the transport, so that a process exiting right after
		// Close does not take unsent frames with it.
		_ = c.peer().flushWithin(linger)
	}
	c.mu.Lock()
	// The peer's FIN may have come at any point since closed was set: the
	// receive side only notes it (finIn) until finWait says our FIN went, so
	// that both ends closing at once still exchange both FINs.
	finished := c.state.Finished()
	if finished {
		c.state.Phase = PhaseDone
	} else {
		c.state.FinWait = true
	}
	c.mu.Unlock()
	if finished {
		c.t.removeConn(c)
	}
	// Otherwise the conn stays in the table until the peer's FIN (or RST,
	// or failure) arrives; data arriving meanwhile is answered with RST.
	return err
}

// Lane returns the lane the conn runs on — "ucx" or "tcp" (a kernel TCP
// connection) — and why it was chosen, e.g. "kernel tcp: no UCX transport
// better than tcp to this peer" or "same host: shared memory".
func (c *Conn) Lane() (name, reason string) {
	if c.laneWhy == "" {
		return LaneUCX, reasonAcceptedUCX
	}
	return LaneUCX, c.laneWhy
}

// Stats returns a snapshot of the conn's statistics. It takes the conn's
// lock briefly and never blocks on the network.
func (c *Conn) Stats() ConnStats {
	name, why := c.Lane()
	s := ConnStats{
		ID: c.id, Lane: name, LaneReason: why, Transports: c.Transports(),
		BytesIn: c.cnt.bytesIn.Load(), BytesOut: c.cnt.bytesOut.Load(),
		FramesIn: c.cnt.framesIn.Load(), FramesOut: c.cnt.framesOut.Load(),
		Age: time.Since(c.born),
	}
	if p := c.peer(); p != nil {
		s.RTT = time.Duration(p.rtt.Load())
	}
	c.mu.Lock()
	s.Local, s.Remote, s.Dialed = c.laddr.String(), c.raddr.String(), c.dialed
	s.State = stateName(c.state, c.rerr != nil)
	s.SendWindow = uint64(max(c.swin.Available(), 0))
	s.RecvWindow = uint64(c.in.Size())
	s.Unread = uint64(c.in.Buffered())
	c.mu.Unlock()
	s.Queued = uint64(c.out.Queued())
	return s
}

// loadRemoteID returns c.remoteID, taking c.mu: the caller must not hold
// c.mu (it may hold t.mu, which comes first).
func (c *Conn) loadRemoteID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.remoteID
}

// ReadState says what a Read would find now, without blocking: data
// waiting (or a conn already closed here), or the peer's end (its FIN or a
// reset) with nothing left before it. A UCX-lane conn's SyscallConn
// answers a pool's health check with it.
func (c *Conn) ReadState() (data, ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.in.Buffered() > 0 {
		return true, false
	}
	return false, c.state.Finished() || c.rerr != nil
}

// LaneSocket returns nil: a UCX stream has no socket of its own.
func (c *Conn) LaneSocket() *net.TCPConn { return nil }
