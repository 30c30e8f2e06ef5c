package session

// Small writes while the engine is busy or backed up: queued and coalesced
// instead of sent one frame each (autocorking). This is the one place
// frames are queued: the engines only send.
//
// Every send holds the engine's worker, which the engine goroutine holds
// while it progresses UCX and other writers hold while they send; and
// while UCX holds sends it could not start (a full shared-memory FIFO or
// socket), a new frame would only wait behind them. A small Write that
// finds the worker held, or UCX backed up, does not send: it copies its
// bytes into its conn's open frame — a DATA frame whose sequence number is
// already taken — and returns. Further small writes to the same conn
// append to it until it is full, so a backed-up conn sends one frame per
// coalesceMax bytes instead of one per write, and the receiver handles
// (and wakes its reader for) a fraction of the frames. Whoever holds the
// worker next sends the open frames: all of them before any other send,
// flush or close (acquire), and, when it gives the worker back, those
// whose peer has caught up (giveBack); the engine's Writable events (the
// worker given back after a writer found it held; UCX finished sends it
// held) and Ticks have the handler do the same, and frames kept for a
// backed-up peer go out after maxQueueWait (100 µs) at the latest. A Write
// that finds the worker free and its peer caught up sends at once.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// coalesceMax is the most a queued frame holds. Writes of more than half
// of it go through the engine's lock directly: copying them twice (here,
// then into UCX) would cost more than waiting.
const coalesceMax = 32 << 10

// writeSmall sends p (no more than half of coalesceMax and of frame,
// within the send window) as c's next data over sp, hb being the DATA
// header: into the open frame if it has room (a full one is sent first),
// else at once if the worker is free and the peer has caught up, else into
// a new open frame. frame is the largest frame the path allows. With gate
// it first checks that UCX does not hold so much for the peer that p must
// wait for it to drain (backedUp; else it returns errBackedUp, done). One
// use of the peer's endpoint and one read of its backlog serve all of it.
// done = false means none of these worked out: the caller sends p holding
// the worker. Called with c.wmu held.
func (c *Conn) writeSmall(sp SendPath, hb, p []byte, frame int, gate bool) (sent int, done bool, err error) {
	var pending, free bool
	peer := c.peer()
	err = peer.use(func(ep engine.EP) (err error) {
		bl := c.sh.eng.Backlog(ep)
		if gate && c.backedUp(sp, true, bl) {
			return errBackedUp
		}
		switch appended, open := c.appendOut(p, frame); {
		case appended:
			sent, done = len(p), true
			return nil
		case open:
			return nil
		}
		// Send at once, if the worker is free and this peer has no sends
		// waiting in UCX (else this frame would only queue behind them).
		if bl > 0 {
			c.openOut(hb, p, frame)
			sent, done = len(p), true
			return nil
		}
		w := c.sh.eng.Acquire(false)
		if w == nil {
			c.openOut(hb, p, frame)
			sent, done = len(p), true
			return nil
		}
		free = true
		c.sh.sendQueued(w, false) // what others queued (this conn has none: it would have appended)
		sent, pending, err = w.Send(ep, engine.Frames{Header: hb, SeqOff: stream.SeqOffset, LenOff: stream.LengthOffset,
			Seq: c.seq, Data: p, Frame: frame})
		c.sh.giveBack(w)
		return err
	})
	switch {
	case err == errBackedUp:
		return 0, true, err
	case free || err != nil:
		if pending {
			peer.unflushed.Add(int64(sent))
		}
		c.framesSent(sent, frame)
		return sent, true, err
	}
	return sent, done, nil
}

// openOut opens c's frame with p, for whoever holds the worker next to
// send once the peer has caught up (the engine busy or backed up), and
// queues it. Called with c.wmu held.
func (c *Conn) openOut(hb, p []byte, frame int) {
	c.out.Open(hb, c.seq, min(frame, coalesceMax), c.t.outBufs.get(len(p)), p)
	c.seq++
	c.t.stats.queuedWrites.Add(1)
	c.sh.queueOut(c)
}

// appendOut appends p to c's open frame if it has room, sending a full one
// first (and whatever else is queued). open reports a frame still open
// that p did not fit in (its peer is gone, say): p must not open another.
// Called with c.wmu held.
func (c *Conn) appendOut(p []byte, frame int) (appended, open bool) {
	for try := 0; ; try++ {
		appended, open = c.out.Append(p, frame)
		if appended {
			c.t.stats.queuedWrites.Add(1)
			return true, false
		}
		if !open || try > 0 {
			return false, open
		}
		// Full: send it (and whatever else is queued), then start anew.
		c.sh.flushOut()
	}
}

// frameBufs recycles open frames' buffers.
type frameBufs struct{ BufPool }

// get returns a buffer for an open frame whose first write is n
// bytes: a recycled full-size one, else one sized for a few such writes
// (append grows it), so that many conns each queueing a small message
// do not each take coalesceMax bytes.
func (fb *frameBufs) get(n int) []byte {
	if b := fb.Get(); b != nil {
		return b
	}
	return make([]byte, 0, min(coalesceMax, max(4*n, 4<<10)))
}

// put recycles an open frame's buffer, if it grew to full size (at
// most maxOutBufs are kept: the idle cost of a busy moment stays bounded).
func (fb *frameBufs) put(b []byte) {
	if cap(b) >= coalesceMax {
		fb.Put(b)
	}
}

// maxOutBufs is how many open-frame buffers a transport keeps for reuse.
const maxOutBufs = 64

// outQueue is a shard's queue of open frames: the peers of its worker
// with conns whose frame waits to be sent (each peer's conns are in
// peer.outQ), in the order they were first queued. mu is a leaf lock.
type outQueue struct {
	mu    sync.Mutex
	peers []*peer
	spare []*peer // sendQueued's swap buffer
	// keptSince is when sendQueued began keeping frames for backed-up
	// peers (zero: it keeps none), under mu.
	keptSince time.Time
	// failed lists the conns whose open frame's send failed, to reset
	// outside the worker (resetFailed), under mu.
	failed []*Conn
	// queued: frames are queued; fresh: some since the last sendQueued.
	queued, fresh atomic.Bool
	// hdr is the header of the frame sendOut sends, copied out of the
	// conn's open frame (guarded by the worker: its holder sends): a
	// field, not a local, so that it costs no allocation per frame.
	hdr [stream.HeaderLen]byte
}

// maxQueueWait is the longest frames kept for a backed-up peer wait
// before they go out behind what UCX holds for it: one peer that stopped
// draining must not hold back frames to others for long (they are kept
// per peer), nor its own.
const maxQueueWait = 100 * time.Microsecond

// queueOut puts c's open frame on its peer's queue (and the peer on s's
// list of peers with queued frames; c is on s), then sends it if the
// worker is free and the peer caught up; else whoever holds the worker
// sees to it when giving it back, or the engine's Writable event does.
func (s *shard) queueOut(c *Conn) {
	p := c.peer()
	q := &s.out
	q.mu.Lock()
	if len(p.outQ) == 0 {
		q.peers = append(q.peers, p)
	}
	p.outQ = append(p.outQ, c)
	q.mu.Unlock()
	q.fresh.Store(true)
	q.queued.Store(true)
	if w := s.eng.Acquire(false); w != nil {
		s.giveBack(w)
	}
}

// acquire takes s's engine's worker, waiting for it, and sends every
// queued frame first: they go out before whatever the caller sends.
func (s *shard) acquire() engine.Worker {
	w := s.eng.Acquire(true)
	s.sendQueued(w, true)
	return w
}

// giveBack sends the queued frames whose peer has caught up and gives the
// worker back; then, if writers that found the worker held queued frames
// meanwhile and the worker is free, it sends those too, once. Frames
// queued after that are seen to by their writer (queueOut takes a free
// worker), by whoever holds the worker next, or by the Writable event that
// a writer finding it held is owed: a writer or the engine goroutine does
// not keep sending other conns' frames for as long as new ones come.
func (s *shard) giveBack(w engine.Worker) {
	s.sendQueued(w, false)
	w.GiveBack()
	if !s.out.fresh.Load() {
		return
	}
	if w = s.eng.Acquire(false); w != nil { // nil: its holder sees to them, or the Writable event that follows
		s.sendQueued(w, false)
		w.GiveBack()
	}
}

// flushOut sends every queued frame now, waiting for the worker: also
// for a holder that took the queue and is sending it, so that a failed
// send of a conn's frame is seen (TakeErr) once flushOut returns.
func (s *shard) flushOut() { s.giveBack(s.acquire()) }

// sendQueued sends the queued open frames, holding w: all of them, or
// (all = false) those whose peer is not backed up, unless frames were kept
// for maxQueueWait; the others stay queued, growing, and Acquire(false),
// failing while w is held, has a Writable event follow, so that the
// engine looks at them again on its next pass. Frames are queued per peer,
// so keeping a backed-up peer's costs one check, whatever its number of
// conns.
func (s *shard) sendQueued(w engine.Worker, all bool) {
	q := &s.out
	if !q.queued.Load() {
		return
	}
	q.fresh.Store(false) // before taking the queue: frames queued from now on set it again
	q.queued.Store(false)
	q.mu.Lock()
	peers := q.peers
	q.peers = q.spare[:0]
	q.spare = nil
	if !all && !q.keptSince.IsZero() && time.Since(q.keptSince) >= maxQueueWait {
		all = true
	}
	q.mu.Unlock()
	k := 0
	for i, p := range peers {
		peers[i] = nil
		// An endpoint being closed must not be used: closeEP marks it
		// before it takes the worker, and we hold the worker.
		closing := p.closing.Load()
		if !all && !closing && s.eng.Backlog(p.ep) > 0 {
			peers[k] = p // UCX is still sending earlier frames to this peer
			k++
			continue
		}
		s.sendPeerOut(w, p, closing)
	}
	s.keepOut(peers, k)
	if k > 0 {
		s.eng.Acquire(false) // nil (w is held): a Writable event follows
	}
}

// keepOut puts the k peers kept at the head of peers back on the queue,
// before those queued meanwhile (they are older), and notes since when
// frames are kept.
func (s *shard) keepOut(peers []*peer, k int) {
	q := &s.out
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case k == 0:
		q.keptSince = time.Time{}
	case q.keptSince.IsZero():
		q.keptSince = time.Now()
	}
	if k > 0 {
		newer := q.peers
		q.peers = append(peers[:k], newer...)
		clear(newer)
		peers = newer
		q.queued.Store(true)
	}
	q.spare = peers[:0]
}

// sendPeerOut sends the open frames of p's conns, holding w (closing: p's
// endpoint is being closed, and they are dropped).
func (s *shard) sendPeerOut(w engine.Worker, p *peer, closing bool) {
	q := &s.out
	q.mu.Lock()
	conns := p.outQ
	p.outQ = p.outSpare[:0]
	p.outSpare = nil
	q.mu.Unlock()
	for j, c := range conns {
		conns[j] = nil
		s.sendOut(w, c, closing)
	}
	q.mu.Lock()
	p.outSpare = conns[:0] // a conn queued meanwhile listed p again (queueOut)
	q.mu.Unlock()
}

// sendOut sends c's open frame, if it is still open, holding w; closing
// says its endpoint is being closed: the frame is dropped.
func (s *shard) sendOut(w engine.Worker, c *Conn, closing bool) {
	q := &s.out
	seq, buf, ok := c.out.Take(q.hdr[:])
	if !ok {
		return
	}
	if !closing {
		p := c.peer()
		sent, pending, err := w.Send(p.ep, engine.Frames{Header: q.hdr[:], SeqOff: stream.SeqOffset, LenOff: stream.LengthOffset,
			Seq: seq, Data: buf, Frame: len(buf)})
		if pending {
			p.unflushed.Add(int64(sent))
		}
		s.t.stats.framesOut.Add(1)
		c.cnt.framesOut.Add(1)
		if err != nil {
			s.outFailed(c, withDetail(ErrReset, "%v", err))
		}
	}
	s.t.outBufs.put(buf)
}

// outFailed records that c's open frame was lost (err): its stream has a
// gap, so it must be reset, which sends an RST and so needs the worker
// this goroutine holds. A Write or FIN that comes first sees o.err
// (TakeErr) and resets the conn itself; else the handler does, on the
// Writable event that follows the worker's give-back (resetFailed).
func (s *shard) outFailed(c *Conn, err error) {
	c.out.Fail(err)
	q := &s.out
	q.mu.Lock()
	q.failed = append(q.failed, c)
	q.mu.Unlock()
	s.eng.Acquire(false) // nil (held here): a Writable event follows
}

// resetFailed resets the conns whose open frame was lost (outFailed), on
// the engine goroutine.
func (s *shard) resetFailed() {
	q := &s.out
	q.mu.Lock()
	failed := q.failed
	q.failed = nil
	q.mu.Unlock()
	for _, c := range failed {
		if err := c.out.TakeErr(); err != nil {
			c.terminate(err, EndGap)
		}
	}
}

// send sends f on p's endpoint, holding the worker of p's shard (after
// the queued frames: acquire).
func (p *peer) send(f engine.Frames) (sent int, pending bool, err error) {
	s := p.sh
	err = p.use(func(ep engine.EP) (err error) {
		w := s.acquire()
		sent, pending, err = w.Send(ep, f)
		s.giveBack(w)
		return err
	})
	return sent, pending, err
}

// backlog returns the payload bytes of sends s's UCX worker holds copies
// of and has not finished, to all its peers.
func (s *shard) backlog() uint64 { return s.eng.Backlog(engine.EP{}) }
