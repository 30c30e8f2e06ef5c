package ucxnet

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Conn is a ucxnet connection: a byte stream carried as UCX active
// messages. It implements net.Conn and, like *net.TCPConn, CloseWrite.
// All methods are safe for concurrent use.
type Conn struct {
	t        *Transport
	peer     *peer
	id       uint64    // our conn id: frames to us carry it
	remoteID uint64    // the peer's conn id: frames we send carry it
	frame    int       // largest frame payload to send (both sides' EagerMax)
	peerSegs segLimits // largest frames the peer receives as one UCX message
	laddr    Addr
	raddr    Addr
	dialDone chan struct{} // closed when a dial is answered
	auth     *authState    // pre-shared-key handshake state, if any
	// from identifies the UCX endpoint the peer's frames for this conn
	// come from (engine.Event.From), learnt from its first handshake frame;
	// frames from anywhere else are dropped. Engine goroutine only.
	from uintptr
	// early holds frames that came before the ACCEPT (engine goroutine).
	early      []earlyFrame
	earlyBytes int

	mu     sync.Mutex
	state  connState
	rwin   stream.RecvWindow
	reasm  *stream.Reassembler
	rbuf   []stream.Segment // in-order data not yet read; Data is held UCX memory (Ref) or Go memory
	rEOF   bool             // the peer's FIN was delivered
	rerr   error            // reset / failure, reported after buffered data
	rwait  int              // readers waiting
	rcond  chan struct{}
	swin   stream.SendWindow
	wshut  bool // CloseWrite called: no more writes
	finOut bool // FIN sent
	werr   error
	wwait  int
	wcond  chan struct{}
	closed bool // Close called
	dErr   error
	linger time.Duration // SetLinger: < 0 the transport's Linger, 0 reset on Close

	closedCh      chan struct{} // closed by Close
	wmu           sync.Mutex    // serializes writers and the FIN after them
	seq           uint64        // next sequence number to send (under wmu)
	readDeadline  deadline
	writeDeadline deadline
}

// newConn returns a conn to p (nil: attached later) with a receive window
// of window bytes.
func newConn(t *Transport, p *peer, laddr, raddr Addr, window int) *Conn {
	c := &Conn{
		t:             t,
		peer:          p,
		frame:         t.cfg.EagerMax,
		peerSegs:      peerSegLimits(stream.Hello{}), // until the peer's Hello says more
		laddr:         laddr,
		raddr:         raddr,
		dialDone:      make(chan struct{}),
		rwin:          stream.NewRecvWindow(uint32(min(window, t.cfg.Window))),
		reasm:         stream.NewReassembler(maxAhead),
		rcond:         make(chan struct{}),
		wcond:         make(chan struct{}),
		swin:          stream.NewSendWindow(0),
		closedCh:      make(chan struct{}),
		linger:        -1,
		readDeadline:  makeDeadline(),
		writeDeadline: makeDeadline(),
	}
	return c
}

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
	if p := c.peer.info.Load(); p != nil {
		return append([]string(nil), (*p)...)
	}
	var tl []string
	_ = c.peer.use(func(ep engine.EP) error {
		tl = c.t.eng.Transports(ep)
		return nil
	})
	if tl == nil {
		return nil
	}
	c.peer.info.Store(&tl)
	return append([]string(nil), tl...)
}

// ID returns the conn's local id (as carried in frames to it).
func (c *Conn) ID() uint64 { return c.id }

func (c *Conn) opErr(op string, err error) error {
	if err == io.EOF {
		return io.EOF
	}
	return &net.OpError{Op: op, Net: Network, Source: c.laddr, Addr: c.raddr, Err: err}
}

// broadcast wakes every waiter of a condition channel. c.mu is held.
func broadcast(ch *chan struct{}, waiting int) {
	if waiting > 0 {
		close(*ch)
		*ch = make(chan struct{})
	}
}

// Read reads data from the conn. After the peer's Close or CloseWrite and
// once everything it sent is read, Read returns io.EOF.
func (c *Conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		}
		dl := c.readDeadline.wait()
		if isClosedChan(dl) {
			c.mu.Unlock()
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		if len(c.rbuf) > 0 {
			if len(b) == 0 {
				c.mu.Unlock()
				return 0, nil
			}
			n := 0
			var doneBuf [8]stream.Ref
			done := doneBuf[:0]
			for n < len(b) && len(c.rbuf) > 0 {
				seg := &c.rbuf[0]
				m := copy(b[n:], seg.Data)
				n += m
				if m < len(seg.Data) {
					seg.Data = seg.Data[m:]
					break
				}
				if seg.Ref.Kind != 0 {
					done = append(done, seg.Ref)
				} else {
					c.t.putBuf(seg.Data)
				}
				c.rbuf[0] = stream.Segment{}
				c.rbuf = c.rbuf[1:]
			}
			if len(c.rbuf) == 0 {
				c.rbuf = c.rbuf[:0:0]
			}
			limit, send := c.rwin.Consume(n)
			open := c.state == stateOpen && !c.rEOF
			c.mu.Unlock()
			c.t.eng.Release(done...)
			if send && open {
				c.sendWindow(limit)
			}
			return n, nil
		}
		if c.rEOF {
			// Everything the peer sent was read: a failure after its FIN
			// (say, its process exiting) changes nothing for reads.
			c.mu.Unlock()
			return 0, io.EOF
		}
		if c.rerr != nil {
			err := c.rerr
			c.mu.Unlock()
			return 0, c.opErr("read", err)
		}
		if len(b) == 0 {
			c.mu.Unlock()
			return 0, nil
		}
		cond := c.rcond
		c.rwait++
		c.mu.Unlock()
		select {
		case <-cond:
		case <-dl:
		case <-c.closedCh:
		}
		c.mu.Lock()
		c.rwait--
	}
}

// accepted grows an accepted conn's receive window from preAcceptWindow
// to the transport's Window once Accept hands it to the application.
func (c *Conn) accepted() {
	c.mu.Lock()
	limit, send := c.rwin.Resize(uint32(c.t.cfg.Window))
	open := c.state == stateOpen && !c.rEOF
	c.mu.Unlock()
	if send && open {
		c.sendWindow(limit)
	}
}

func (c *Conn) sendWindow(limit uint64) {
	_ = c.t.sendCtl(c.peer, stream.Header{Kind: stream.KindWindow, ConnID: c.remoteID, Aux: limit})
}

// Write writes data to the conn. It returns once all of b is handed to UCX
// and UCX is done with b — taken by the transport inline, copied into
// C-owned buffers that the send owns until it completes, or (over shared
// memory, for ZeroCopyMin bytes or more) sent straight from b, pinned until
// UCX reports it sent: b may be reused at once — or with an error, in
// which case n says how many bytes were sent (on a reset conn, at least
// that many may have reached the peer). Write blocks while the
// peer's receive window is full; the deadline is checked before each part
// is committed to UCX.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return n, c.opErr("write", net.ErrClosed)
		}
		if c.werr != nil {
			err := c.werr
			c.mu.Unlock()
			return n, c.opErr("write", err)
		}
		if c.wshut {
			c.mu.Unlock()
			return n, c.opErr("write", ErrWriteAfterShutdown)
		}
		dl := c.writeDeadline.wait()
		if isClosedChan(dl) {
			c.mu.Unlock()
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		}
		if n == len(b) {
			c.mu.Unlock()
			return n, nil
		}
		avail := c.swin.Available()
		if avail == 0 {
			cond := c.wcond
			c.wwait++
			c.mu.Unlock()
			select {
			case <-cond:
			case <-dl:
			case <-c.closedCh:
			}
			c.mu.Lock()
			c.wwait--
			continue
		}
		chunk := min(avail, len(b)-n)
		c.mu.Unlock()

		if c.peer.unflushed.Load() >= peerBufferMax {
			if err := c.drainPeer(dl); err != nil {
				if err == os.ErrDeadlineExceeded || err == net.ErrClosed {
					return n, c.opErr("write", err)
				}
				c.mu.Lock()
				if c.werr == nil {
					c.werr = err
				}
				continue
			}
		}

		h := stream.Header{Kind: stream.KindData, ConnID: c.remoteID}
		hb := h.Bytes()
		sp := c.peer.path(c.t)
		frame := min(c.frame, sp.frame, c.peerSegs.limit(sp.kind))
		var sent int
		var err error
		if sp.zeroCopy && chunk >= ZeroCopyMin {
			sent, err = c.sendZeroCopy(hb[:], b[n:n+chunk], frame)
		} else {
			err = c.peer.use(func(ep engine.EP) (err error) {
				sent, err = c.t.eng.SendFrames(ep, hb[:], seqOffset, lenOffset, c.seq, b[n:n+chunk], frame)
				return err
			})
		}
		frames := (sent + frame - 1) / frame
		c.seq += uint64(frames)
		c.peer.unflushed.Add(int64(sent))
		c.t.stats.framesOut.Add(uint64(frames))
		c.t.stats.bytesOut.Add(uint64(sent))
		n += sent

		c.mu.Lock()
		c.swin.Consume(sent)
		if err != nil && c.werr == nil {
			c.werr = withDetail(ErrReset, "%v", err)
		}
	}
}

// peerBufferMax bounds the payload bytes sent to one peer since UCX last
// confirmed it had finished every send to it: past it, writers to that peer
// wait for a flush. UCX buffers sends it cannot start (a full socket, a
// peer that stopped progressing) in C memory; the receive windows bound
// each conn, this bounds a peer's conns together.
const peerBufferMax = 64 << 20

// drainPeer waits until UCX has finished every send to c's peer (a flush),
// the write deadline dl passes (os.ErrDeadlineExceeded) or c is closed
// (net.ErrClosed). Called with c.wmu held.
func (c *Conn) drainPeer(dl <-chan struct{}) error {
	t, p := c.t, c.peer
	token, ch := t.newOp()
	var done bool
	err := p.use(func(ep engine.EP) (err error) {
		done, err = t.eng.Flush(ep, token)
		return err
	})
	if done || err != nil {
		t.forgetOp(token)
		if err != nil {
			return withDetail(ErrReset, "%v", err)
		}
		p.unflushed.Store(0)
		return nil
	}
	select {
	case st := <-ch:
		if st != nil {
			return withDetail(ErrReset, "flush: %v", st)
		}
		p.unflushed.Store(0)
		return nil
	case <-dl:
		t.forgetOp(token)
		return os.ErrDeadlineExceeded
	case <-c.closedCh:
		t.forgetOp(token)
		return net.ErrClosed
	}
}

// sendZeroCopy sends p as frames straight from p's memory and waits until
// UCX is done with it: p is pinned meanwhile, and Write's caller may reuse
// it as soon as Write returns. If the send fails, none of p counts as
// sent: the conn is broken, and some of p may not have gone out. Called
// with c.wmu held.
func (c *Conn) sendZeroCopy(hdr, p []byte, frame int) (sent int, err error) {
	var pin runtime.Pinner
	pin.Pin(&p[0])
	defer pin.Unpin()
	token, done := c.t.newOp()
	var wait bool
	err = c.peer.use(func(ep engine.EP) (err error) {
		sent, wait, err = c.t.eng.SendFramesZC(ep, hdr, seqOffset, lenOffset, c.seq, p, frame, token)
		return err
	})
	if !wait {
		c.t.forgetOp(token)
		return sent, err
	}
	if st := c.waitZeroCopy(done); st != nil {
		if err == nil {
			err = st
		}
		return 0, err
	}
	return sent, err
}

// zeroCopyGrace is how long a zero-copy send may stay unfinished after the
// write deadline passed or the conn was closed before the peer is taken
// for hung.
const zeroCopyGrace = 2 * time.Second

// waitZeroCopy waits until UCX has finished a zero-copy send. UCX finishes
// an eager send without the peer application's help — only the peer's
// progress engine must drain the transport, and a dead peer fails the
// send — so the data is committed and the wait normally takes
// microseconds, whatever the deadline. But a peer process that is stopped
// or hung neither drains nor fails: once the write deadline has passed (or
// the conn is closed) and zeroCopyGrace more has gone by, its endpoint is
// force-closed, which cancels the send (UCX never reads the writer's
// memory again) and resets every conn to that peer.
func (c *Conn) waitZeroCopy(done <-chan error) error {
	var grace <-chan time.Time
	closed := c.closedCh
	for {
		var dl chan struct{}
		if grace == nil {
			dl = c.writeDeadline.wait()
		}
		select {
		case st := <-done:
			return st
		case <-dl:
		case <-closed:
		case <-grace:
			if !isClosedChan(c.closedCh) && !c.writeDeadline.expired() {
				grace = nil // the deadline was moved on: wait for it again
				closed = c.closedCh
				continue
			}
			c.t.stats.stalledPeers.Add(1)
			c.t.failPeer(c.peer, fmt.Sprintf("it did not drain a send for %v past the write deadline or close", zeroCopyGrace))
			return <-done
		}
		if grace == nil && (isClosedChan(dl) || isClosedChan(closed)) {
			grace = time.After(zeroCopyGrace)
			closed = nil
		}
	}
}

// Header offsets that SendFrames patches per frame (see stream.Header).
const (
	lenOffset = 4
	seqOffset = 16
)

// SetDeadline sets the read and write deadlines. After Close it returns
// an error matching net.ErrClosed, as *net.TCPConn's does.
func (c *Conn) SetDeadline(t time.Time) error {
	if isClosedChan(c.closedCh) {
		return c.opErr("set", net.ErrClosed)
	}
	c.readDeadline.set(t)
	c.writeDeadline.set(t)
	return nil
}

// SetReadDeadline sets the read deadline; it also interrupts a Read
// already blocked.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if isClosedChan(c.closedCh) {
		return c.opErr("set", net.ErrClosed)
	}
	c.readDeadline.set(t)
	return nil
}

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if isClosedChan(c.closedCh) {
		return c.opErr("set", net.ErrClosed)
	}
	c.writeDeadline.set(t)
	return nil
}

// SetLinger sets how Close treats data not yet handed to the transport,
// as (*net.TCPConn).SetLinger does. sec < 0 (the default): Close sends what
// was written, then FIN, waiting up to the Transport's Linger for UCX to
// hand it on. sec == 0: Close discards it and resets the conn — the peer
// sees ECONNRESET, not EOF (a proxy passes on a reset this way). sec > 0:
// as the default, waiting up to sec seconds.
func (c *Conn) SetLinger(sec int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("set", net.ErrClosed)
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
	if c.closed {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	c.wshut = true
	broadcast(&c.wcond, c.wwait)
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendFin()
}

// sendFin sends FIN after all data, once. c.wmu is held.
func (c *Conn) sendFin() error {
	c.mu.Lock()
	if c.finOut || c.werr != nil || c.state != stateOpen {
		c.mu.Unlock()
		return nil
	}
	c.finOut = true
	c.mu.Unlock()
	err := c.t.sendCtl(c.peer, stream.Header{Kind: stream.KindFin, ConnID: c.remoteID, Seq: c.seq})
	c.seq++
	if err != nil {
		return c.opErr("close", withDetail(ErrReset, "%v", err))
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
	if c.closed {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	c.closed = true
	unread := len(c.rbuf) > 0 || c.reasm.Pending() > 0 || c.linger == 0
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
		c.abort(stream.RstAbort, net.ErrClosed, rstIfOpen)
		return nil
	}
	err := c.sendFin()
	if err == nil && linger > 0 {
		// Like SO_LINGER: wait (bounded) until UCX has handed what we
		// sent to the transport, so that a process exiting right after
		// Close does not take unsent frames with it.
		_ = c.t.flush(c.peer, linger)
	}
	c.mu.Lock()
	finished := c.rEOF || c.state != stateOpen
	if finished {
		c.state = stateDone
	}
	c.mu.Unlock()
	if finished {
		c.t.removeConn(c)
	}
	// Otherwise the conn stays in the table until the peer's FIN (or RST,
	// or failure) arrives; data arriving meanwhile is answered with RST.
	return err
}

// rstChoice says whether abort tells the peer.
type rstChoice bool

const (
	rstIfOpen rstChoice = false // RST only if the conn is open (the peer knows it as established)
	rstAlways rstChoice = true  // RST whatever the state: the peer has a conn waiting for our answer
)

// abort resets the conn: local waiters get err, the conn leaves the table,
// and RST(code) goes to the peer as rst says (never without the peer's
// conn id).
func (c *Conn) abort(code stream.RstCode, err error, rst rstChoice) {
	c.mu.Lock()
	send := (rst == rstAlways || c.state == stateOpen) && c.remoteID != 0 && c.peer != nil
	c.dropLocked()
	c.failLocked(err)
	c.mu.Unlock()
	if send {
		c.t.stats.resetsSent.Add(1)
		_ = c.t.sendCtl(c.peer, stream.Header{Kind: stream.KindRst, ConnID: c.remoteID, Aux: uint64(code)})
	}
	c.t.removeConn(c)
}

// fail marks the conn failed without telling the peer.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	c.failLocked(err)
	c.mu.Unlock()
	c.t.removeConn(c)
}

// dropLocked releases all received data not yet read. c.mu is held.
func (c *Conn) dropLocked() {
	var refs []stream.Ref
	for _, s := range c.rbuf {
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
		}
	}
	for _, s := range c.reasm.Drain() {
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
		}
	}
	c.rbuf = nil
	c.t.eng.Release(refs...)
}

// keepLocked moves unread data out of UCX memory into Go memory, so that it
// stays readable after the conn leaves the transport (a peer's reset or
// failure does not discard what already arrived). c.mu is held.
func (c *Conn) keepLocked() {
	var refs []stream.Ref
	for i := range c.rbuf {
		s := &c.rbuf[i]
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
			s.Data = append([]byte(nil), s.Data...)
			s.Ref = stream.Ref{}
		}
	}
	for _, s := range c.reasm.Drain() { // can never be delivered now
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
		}
	}
	c.t.eng.Release(refs...)
}

func (c *Conn) failLocked(err error) {
	c.keepLocked()
	if c.state == stateAuthPending && c.auth != nil && c.auth.ln != nil {
		c.auth.ln.removePendingAuth(c)
	}
	if c.state == stateDialing || c.state == stateAbandoned {
		c.dErr = err
		close(c.dialDone)
	}
	c.state = stateDone
	if c.rerr == nil {
		c.rerr = err
	}
	if c.werr == nil {
		c.werr = err
	}
	broadcast(&c.rcond, c.rwait)
	broadcast(&c.wcond, c.wwait)
}

// peerFailed handles the failure of the conn's endpoint.
func (c *Conn) peerFailed(why string) {
	c.mu.Lock()
	err := withDetail(ErrReset, "peer failed: %s", why)
	if c.state == stateDialing {
		err = withDetail(ErrRefused, "peer unreachable: %s", why)
	}
	c.failLocked(err)
	c.mu.Unlock()
	c.t.removeConn(c)
}

// handleFrame takes DATA, FIN, WINDOW, RST and PING (engine goroutine).
func (c *Conn) handleFrame(h stream.Header, ev *engine.Event) {
	switch h.Kind {
	case stream.KindData, stream.KindFin:
		c.handleStream(h, ev)
	case stream.KindWindow:
		c.mu.Lock()
		if c.swin.Update(h.Aux) {
			broadcast(&c.wcond, c.wwait)
		}
		c.mu.Unlock()
	case stream.KindRst:
		c.t.stats.resetsRecv.Add(1)
		c.fail(withDetail(ErrReset, "peer sent RST (%v)", stream.RstCode(h.Aux)))
	case stream.KindPing:
		// A keepalive probe: answer it (the answer's arrival is all the
		// prober needs). Answers are not answered.
		if h.Flags&stream.FlagReply == 0 {
			if id := c.remoteIDLocked(); id != 0 {
				_ = c.t.sendCtl(c.peer, stream.Header{Kind: stream.KindPing, Flags: stream.FlagReply, ConnID: id, Aux: h.Aux})
			}
		}
	}
}

// handleStream takes DATA and FIN. A DATA payload is not copied: the conn
// holds UCX's receive descriptor until Read has copied it out.
func (c *Conn) handleStream(h stream.Header, ev *engine.Event) {
	c.mu.Lock()
	if c.state == stateDone || c.state == stateAbandoned {
		c.mu.Unlock()
		return
	}
	if c.closed {
		// Closed locally, waiting for the peer's FIN: more data is answered
		// with RST, as TCP does.
		c.mu.Unlock()
		if h.Kind == stream.KindData {
			c.abort(stream.RstAbort, net.ErrClosed, rstIfOpen)
			return
		}
		c.mu.Lock()
		inOrder := h.Seq == c.reasm.Next()
		if inOrder {
			c.state = stateDone
		}
		c.mu.Unlock()
		if inOrder {
			c.t.removeConn(c)
		}
		// A FIN ahead of data still in flight: that data will be answered
		// with RST when it arrives.
		return
	}
	if c.state == stateAuthPending {
		c.mu.Unlock()
		c.t.stats.protocolResets.Add(1)
		c.abort(stream.RstProtocol, withDetail(ErrProtocol, "data before authentication"), rstAlways)
		return
	}
	seg := stream.Segment{Kind: h.Kind, Seq: h.Seq, Data: ev.Data, Ref: ev.Ref}
	small := len(ev.Data) < c.t.holdMin
	if small && len(ev.Data) > 0 {
		// Holding a UCX descriptor (a whole FIFO segment or receive buffer)
		// for a few bytes would let a window of tiny frames pin far more
		// memory than the window: copy small payloads instead — in order,
		// straight into the read buffer (appendLocked); out of order, into
		// a copy the reassembler keeps.
		seg.Ref = stream.Ref{}
		if h.Seq != c.reasm.Next() {
			seg.Data = append([]byte(nil), ev.Data...)
		}
	}
	segs, err := c.reasm.Push(seg)
	if err == stream.ErrDuplicate {
		c.mu.Unlock()
		c.t.stats.duplicates.Add(1)
		return // not held: released with the batch
	}
	if err == nil && len(ev.Data) > 0 {
		if !small {
			ev.Hold() // the segment is in rbuf or pending now
		}
		err = c.rwin.Receive(len(ev.Data))
	}
	if err == nil && c.reasm.Cost() > int(c.rwin.Size()) {
		// Out-of-order frames are charged their memory, not only their
		// bytes: a peer sending tiny frames out of order cannot make a conn
		// hold many times its window.
		err = fmt.Errorf("out-of-order frames hold %d bytes (with per-frame overhead), more than the %d-byte window", c.reasm.Cost(), c.rwin.Size())
	}
	if err != nil {
		c.mu.Unlock()
		c.t.stats.protocolResets.Add(1)
		c.abort(stream.RstProtocol, withDetail(ErrProtocol, "%v", err), rstIfOpen)
		return
	}
	for _, s := range segs {
		if s.Kind == stream.KindFin {
			c.rEOF = true
		} else {
			c.appendLocked(s)
		}
	}
	if len(segs) > 0 {
		broadcast(&c.rcond, c.rwait)
	}
	c.mu.Unlock()
}

// appendLocked queues an in-order segment for Read. Small Go-owned
// payloads are coalesced into the tail buffer, so that many tiny frames
// cost about their bytes, not a segment each. c.mu is held.
func (c *Conn) appendLocked(s stream.Segment) {
	if s.Ref.Kind == 0 && len(c.rbuf) > 0 {
		tail := &c.rbuf[len(c.rbuf)-1]
		if tail.Ref.Kind == 0 && cap(tail.Data)-len(tail.Data) >= len(s.Data) {
			tail.Data = append(tail.Data, s.Data...)
			return
		}
	}
	if s.Ref.Kind == 0 && len(s.Data) < c.t.holdMin {
		buf := c.t.getBuf()[:len(s.Data)]
		copy(buf, s.Data)
		s.Data = buf
	}
	c.rbuf = append(c.rbuf, s)
}

// maxAhead bounds how far past the next expected frame a frame may arrive
// (UCX does not promise AM order); beyond it the conn is reset.
const maxAhead = 1 << 16
