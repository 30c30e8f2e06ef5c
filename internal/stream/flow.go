package stream

import (
	"errors"
	"math"
)

// MaxWindow is the largest receive window a peer may grant or advertise:
// a Hello with a larger Window is malformed, and a WINDOW frame can raise
// the send limit to at most MaxWindow bytes beyond what was sent
// (SendWindow.Update). It bounds the data one conn may have in flight
// towards a peer that stops draining.
const MaxWindow = 256 << 20

// ErrWindowExceeded means the peer sent more data than the receive limit
// advertised to it.
var ErrWindowExceeded = errors.New("stream: flow control window exceeded")

// SendWindow is the sender's view of flow control: how many bytes it has
// sent and the absolute limit the receiver granted. Limits only grow, so
// KindWindow updates may arrive duplicated or out of order. The zero value
// allows nothing to be sent. It is not safe for concurrent use.
type SendWindow struct {
	limit uint64 // absolute byte limit granted by the peer
	sent  uint64 // bytes sent so far
}

// NewSendWindow returns a window whose limit is the peer's initial
// receive window (from its Hello).
func NewSendWindow(initial uint32) SendWindow {
	return SendWindow{limit: uint64(initial)}
}

// Available returns how many more bytes may be sent now (limit - sent),
// clamped to [0, math.MaxInt].
func (w *SendWindow) Available() int {
	if w.sent >= w.limit {
		return 0
	}
	return int(min(w.limit-w.sent, math.MaxInt))
}

// Consume records that n bytes were sent. It panics if n is negative or
// larger than Available.
func (w *SendWindow) Consume(n int) {
	if n < 0 || n > w.Available() {
		panic("stream: SendWindow.Consume beyond available window")
	}
	w.sent += uint64(n)
}

// Update applies an absolute limit from a KindWindow frame. Stale limits
// (not above the current one) are ignored, and a limit more than MaxWindow
// beyond what was sent is cut to that: a peer cannot make the sender buffer
// without bound by granting more than any receiver could hold. It reports
// whether Available grew.
func (w *SendWindow) Update(limit uint64) bool {
	limit = min(limit, w.sent+MaxWindow)
	if limit <= w.limit {
		return false
	}
	before := w.Available()
	w.limit = limit
	return w.Available() > before
}

// Sent returns the total number of bytes sent.
func (w *SendWindow) Sent() uint64 { return w.sent }

// Limit returns the absolute limit granted by the peer.
func (w *SendWindow) Limit() uint64 { return w.limit }

// RecvWindow is the receiver's view of flow control: bytes received from
// the peer, bytes consumed by the application, and the absolute limit last
// advertised to the peer. The receiver never needs to buffer more than
// Size bytes. It is not safe for concurrent use.
type RecvWindow struct {
	size       uint32 // window size: limit = consumed + size
	received   uint64 // bytes received
	consumed   uint64 // bytes read by the application
	advertised uint64 // absolute limit last advertised to the peer
}

// NewRecvWindow returns a window of size bytes, with the initial limit
// (advertised in the Hello) equal to size. It panics if size is 0.
func NewRecvWindow(size uint32) RecvWindow {
	if size == 0 {
		panic("stream: NewRecvWindow with zero size")
	}
	return RecvWindow{size: size, advertised: uint64(size)}
}

// Receive records n bytes of KindData payload arriving. If that would take
// the total past the advertised limit it returns ErrWindowExceeded and
// leaves the window unchanged. It panics if n is negative.
func (w *RecvWindow) Receive(n int) error {
	if n < 0 {
		panic("stream: RecvWindow.Receive with negative count")
	}
	if uint64(n) > w.advertised-w.received {
		return ErrWindowExceeded
	}
	w.received += uint64(n)
	return nil
}

// Consume records that the application read n bytes. It returns the new
// absolute limit and send=true when a KindWindow update should be sent:
// when the limit grew by at least a quarter of the window (at least 1
// byte) since the last advertisement, which batches updates. Otherwise it
// returns the current advertised limit and false. It panics if n is
// negative or more than Buffered.
func (w *RecvWindow) Consume(n int) (limit uint64, send bool) {
	if n < 0 || uint64(n) > w.received-w.consumed {
		panic("stream: RecvWindow.Consume beyond buffered data")
	}
	w.consumed += uint64(n)
	next := w.consumed + uint64(w.size)
	if next-w.advertised < max(uint64(w.size/4), 1) {
		return w.advertised, false
	}
	w.advertised = next
	return next, true
}

// Resize changes the window size (Size) to size. Growing it raises the
// limit at once: it returns the new limit and send=true, and the caller
// advertises it with a KindWindow frame. Shrinking takes effect as the
// application reads (a limit already advertised is never taken back). It
// panics if size is 0.
func (w *RecvWindow) Resize(size uint32) (limit uint64, send bool) {
	if size == 0 {
		panic("stream: RecvWindow.Resize to zero")
	}
	w.size = size
	next := w.consumed + uint64(size)
	if next <= w.advertised {
		return w.advertised, false
	}
	w.advertised = next
	return next, true
}

// Buffered returns the bytes received but not yet consumed.
func (w *RecvWindow) Buffered() int { return int(w.received - w.consumed) }

// Limit returns the absolute limit last advertised to the peer.
func (w *RecvWindow) Limit() uint64 { return w.advertised }

// Size returns the window size.
func (w *RecvWindow) Size() uint32 { return w.size }
