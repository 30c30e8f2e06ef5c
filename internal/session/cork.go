package session

import (
	"sync"
	"sync/atomic"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// Cork is a stream's open frame (autocorking): small writes made while
// its engine's worker was busy or its peer backed up, coalesced into one
// DATA frame whose sequence number is already taken, waiting for whoever
// holds the worker next to send it. Its lock is a leaf: nothing is called
// with it held. It is safe for concurrent use.
type Cork struct {
	mu   sync.Mutex
	open bool                   // queued: the next holder of the worker sends it
	hdr  [stream.HeaderLen]byte // its header, while open
	seq  uint64                 // its sequence number, while open
	buf  []byte                 // its payload, while open
	max  int                    // the most buf may hold
	err  error                  // its send failed (reported by the next Write or FIN)
	// failed is set with err, so that a Write checks it without the lock.
	failed atomic.Bool
}

// Open opens the frame with header hdr (stream.HeaderLen bytes, copied),
// sequence number seq and p as its payload, copied into buf (emptied),
// growing to at most max bytes.
func (o *Cork) Open(hdr []byte, seq uint64, max int, buf, p []byte) {
	o.mu.Lock()
	o.open = true
	copy(o.hdr[:], hdr)
	o.seq = seq
	o.max = max
	o.buf = append(buf[:0], p...)
	o.mu.Unlock()
}

// Append appends p to the open frame if the frame is open and p fits
// within its max and frame bytes (frame: the largest frame the path allows
// now, which may have been learnt since the frame opened). open reports a
// frame still open that p did not fit in.
func (o *Cork) Append(p []byte, frame int) (appended, open bool) {
	o.mu.Lock()
	open = o.open
	if open && len(o.buf)+len(p) <= min(o.max, frame) {
		o.buf = append(o.buf, p...)
		appended = true
	}
	o.mu.Unlock()
	return appended, open
}

// Take closes the frame and returns it for sending, its header copied
// into hdr (stream.HeaderLen bytes: storage of the caller's that need not
// escape per frame): ok = false if it was not open. The buffer is the
// caller's from now on.
func (o *Cork) Take(hdr []byte) (seq uint64, buf []byte, ok bool) {
	o.mu.Lock()
	if ok = o.open; ok {
		copy(hdr, o.hdr[:])
		seq, buf = o.seq, o.buf
		o.open, o.buf = false, nil
	}
	o.mu.Unlock()
	return seq, buf, ok
}

// Drop discards the open frame (the stream is reset or failed) and
// returns its buffer, if any, for reuse.
func (o *Cork) Drop() []byte {
	o.mu.Lock()
	buf := o.buf
	o.open, o.buf = false, nil
	o.mu.Unlock()
	return buf
}

// Queued returns the payload bytes waiting in the open frame.
func (o *Cork) Queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.open {
		return 0
	}
	return len(o.buf)
}

// Fail records that a send of the frame failed with err: the stream now
// has a gap, so it must be reset.
func (o *Cork) Fail(err error) {
	o.mu.Lock()
	o.err = err
	o.failed.Store(true)
	o.mu.Unlock()
}

// TakeErr returns, once, the error Fail recorded (nil: none).
func (o *Cork) TakeErr() error {
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
