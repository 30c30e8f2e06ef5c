package ucxnet

// Small writes while the engine is busy or backed up: queued and coalesced
// instead of sent one frame each (autocorking; engine.Combiner).
//
// Every send takes the engine's lock, which the engine goroutine holds
// while it progresses the worker and other writers hold while they send;
// and while UCX holds sends it could not start (a full shared-memory FIFO
// or socket), a new frame would only wait behind them. A small Write that
// finds the lock taken, or UCX backed up, does not send: it copies its
// bytes into its conn's open frame — a DATA frame whose sequence number is
// already taken — and returns. Further small writes to the same conn
// append to it until it is full, so a backed-up conn sends one frame per
// coalesceMax bytes instead of one per write, and the receiver handles
// (and wakes its reader for) a fraction of the frames. The engine sends
// open frames before any other send, flush or close on it, once UCX has
// caught up, and after maxQueueWait (100 µs) at the latest; a Write that
// finds the engine free and caught up sends at once, as before.

import (
	"sync"
	"sync/atomic"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// coalesceMax is the most a queued frame holds. Writes of more than half
// of it go through the engine's lock directly: copying them twice (here,
// then into UCX) would cost more than waiting.
const coalesceMax = 32 << 10

// outFrame is a conn's open frame: data written while the engine was
// busy, not yet sent. mu is a leaf lock: nothing is called with it held.
type outFrame struct {
	mu   sync.Mutex
	open bool                   // queued: the next Combine sends it
	hdr  [stream.HeaderLen]byte // its header, while open
	seq  uint64                 // its sequence number, while open
	buf  []byte                 // its payload, while open
	max  int                    // the most buf may hold
	err  error                  // a Combine's send failed (reported by the next Write)
	// failed is set with err, so that Write checks it without the lock.
	failed atomic.Bool
}

// takeErr returns (once) the error of a Combine's failed send of the open
// frame: the stream has a gap, so the conn must be reset (Conn.sendFailed).
func (o *outFrame) takeErr() error {
	if !o.failed.Load() {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	err := o.err
	o.err = nil
	o.failed.Store(false)
	return err
}

// drop discards the open frame: the conn is reset or failed.
func (o *outFrame) drop(t *Transport) {
	o.mu.Lock()
	buf := o.buf
	o.open, o.buf = false, nil
	o.mu.Unlock()
	if buf != nil {
		t.putOutBuf(buf)
	}
}

// writeSmall sends p (no more than half of coalesceMax and of frame,
// within the send window) as c's next data, hb being the DATA header: into
// the open frame if it has room (a full one is sent first), else at once if
// the engine is free and has caught up, else into a new open frame. frame
// is the largest frame the path allows. ok = false means none of these
// worked out: the caller sends p through the engine's lock. Called with
// c.wmu held.
func (c *Conn) writeSmall(hb [stream.HeaderLen]byte, p []byte, frame int) (sent int, ok bool, err error) {
	o := &c.out
	for try := 0; ; try++ {
		o.mu.Lock()
		if !o.open {
			o.mu.Unlock()
			break
		}
		if len(o.buf)+len(p) <= min(o.max, frame) { // frame: the path may have been learnt since
			o.buf = append(o.buf, p...)
			o.mu.Unlock()
			c.t.stats.queuedWrites.Add(1)
			return len(p), true, nil
		}
		o.mu.Unlock()
		if try > 0 {
			return 0, false, nil // still open: the engine is closed, say
		}
		// Full: send it (and whatever else is queued), then start anew.
		if err := c.t.eng.SendQueued(); err != nil {
			return 0, true, err
		}
	}

	// Send at once, if the engine is free and has no sends to this peer
	// waiting (else this frame would only queue behind them, in UCX).
	var pending, free bool
	err = c.peer.use(func(ep engine.EP) (err error) {
		if c.t.eng.BufferedTo(ep) > 0 {
			return nil
		}
		sent, pending, free, err = c.t.eng.TrySendFrames(ep, hb[:], stream.SeqOffset, stream.LengthOffset, c.seq, p, frame)
		return err
	})
	if free || err != nil {
		if pending {
			c.peer.unflushed.Add(int64(sent))
		}
		c.framesSent(sent, frame)
		return sent, true, err
	}

	// Busy or backed up: open a frame for p and whatever follows, sent by
	// whoever holds the engine next once the peer has caught up.
	buf := c.t.getOutBuf(len(p))
	o.mu.Lock()
	o.open = true
	o.hdr = hb
	o.seq = c.seq
	o.max = min(frame, coalesceMax)
	o.buf = append(buf[:0], p...)
	o.mu.Unlock()
	c.seq++
	c.t.stats.queuedWrites.Add(1)
	c.t.queueOut(c)
	return len(p), true, nil
}

// getOutBuf returns a buffer for an open frame whose first write is n
// bytes: a recycled full-size one, else one sized for a few such writes
// (append grows it), so that many conns each queueing a small message
// do not each take coalesceMax bytes.
func (t *Transport) getOutBuf(n int) []byte {
	if b := t.outBufs.get(); b != nil {
		return b
	}
	return make([]byte, 0, min(coalesceMax, max(4*n, 4<<10)))
}

// putOutBuf recycles an open frame's buffer, if it grew to full size (at
// most maxOutBufs are kept: the idle cost of a busy moment stays bounded).
func (t *Transport) putOutBuf(b []byte) {
	if cap(b) >= coalesceMax {
		t.outBufs.put(b)
	}
}

// maxOutBufs is how many open-frame buffers a transport keeps for reuse.
const maxOutBufs = 64

// queueOut puts c's open frame on its peer's queue (and the peer on the
// transport's list of peers with queued frames) and tells the engine.
func (t *Transport) queueOut(c *Conn) {
	p := c.peer
	t.outMu.Lock()
	if len(p.outQ) == 0 {
		t.outPeers = append(t.outPeers, p)
	}
	p.outQ = append(p.outQ, c)
	t.outMu.Unlock()
	t.eng.Queued()
}

// combine sends the queued open frames (engine.Combiner): all of them, or
// (all = false) those whose peer is not backed up; the others stay queued,
// growing, and kept says so. Frames are queued per peer, so keeping a
// backed-up peer's costs one check, whatever its number of conns. It runs
// with the engine held, on whichever goroutine holds it; it takes only
// leaf locks.
func (t *Transport) combine(s engine.Sender, all bool) (kept bool) {
	t.outMu.Lock()
	peers := t.outPeers
	t.outPeers = t.outSpare[:0]
	t.outSpare = nil
	t.outMu.Unlock()
	k := 0
	for i, p := range peers {
		peers[i] = nil
		// An endpoint being closed must not be used: closeEP marks it
		// before it takes the engine, and we hold the engine.
		closing := p.closing.Load()
		if !all && !closing && s.BufferedTo(p.ep) > 0 {
			peers[k] = p // UCX is still sending earlier frames to this peer
			k++
			continue
		}
		t.outMu.Lock()
		q := p.outQ
		p.outQ = p.outSpare[:0]
		p.outSpare = nil
		t.outMu.Unlock()
		for j, c := range q {
			q[j] = nil
			t.sendOut(s, c, closing)
		}
		t.outMu.Lock()
		p.outSpare = q[:0] // a conn queued meanwhile listed p again (queueOut)
		t.outMu.Unlock()
	}
	t.outMu.Lock()
	if k > 0 {
		newer := t.outPeers
		t.outPeers = append(peers[:k], newer...) // the kept ones first: they are older
		clear(newer)
		peers = newer
	}
	t.outSpare = peers[:0]
	t.outMu.Unlock()
	return k > 0
}

// sendOut sends c's open frame, if it is still open (Combine, engine
// held); closing says its endpoint is being closed: the frame is dropped.
func (t *Transport) sendOut(s engine.Sender, c *Conn, closing bool) {
	o := &c.out
	o.mu.Lock()
	if !o.open {
		o.mu.Unlock()
		return
	}
	hdr, seq, buf := o.hdr, o.seq, o.buf
	o.open, o.buf = false, nil
	o.mu.Unlock()
	if !closing {
		p := c.peer
		sent, pending, err := s.SendFrames(p.ep, hdr[:], stream.SeqOffset, stream.LengthOffset, seq, buf, len(buf))
		if pending {
			p.unflushed.Add(int64(sent))
		}
		t.stats.framesOut.Add(1)
		c.cnt.framesOut.Add(1)
		if err != nil {
			err = withDetail(ErrReset, "%v", err)
			o.mu.Lock()
			o.err = err
			o.failed.Store(true)
			o.mu.Unlock()
			// The engine is held here: the reset (an RST to send) waits
			// for it on another goroutine. A Write or FIN that comes
			// first sees o.err (takeErr) and resets the conn itself.
			go c.sendFailed(err)
		}
	}
	t.putOutBuf(buf)
}
