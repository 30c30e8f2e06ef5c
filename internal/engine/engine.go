// Package engine is the boundary between ucxnet's conn logic and whatever
// moves its frames: the vocabulary (endpoints, received frames, events)
// and the Engine interface that the conn logic in package ucxnet depends
// on.
//
// Two implementations exist: package progress drives a real UCX worker
// (cgo), and package engine/memengine moves frames between engines in one
// process's memory, with hooks to drop, duplicate, reorder and inject
// frames, so that conn behaviour tests run without UCX (CGO_ENABLED=0
// included). This package itself is pure Go and knows nothing of UCX.
package engine

import (
	"time"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// EP is an opaque endpoint handle: the way to one peer. Implementations
// keep their own handle inside; the zero EP is no endpoint. EPs are
// comparable (usable as map keys).
type EP struct{ v any }

// NewEP wraps an implementation's endpoint handle. h must be comparable.
func NewEP(h any) EP { return EP{h} }

// Handle returns the implementation's handle.
func (e EP) Handle() any { return e.v }

// Valid reports whether e refers to an endpoint.
func (e EP) Valid() bool { return e.v != nil }

// Kind says what an Event reports.
type Kind int

// Event kinds.
const (
	// Frame: an active message arrived (Header, Data, From).
	Frame Kind = iota + 1
	// EPError: an endpoint failed (EP, Err). It is unusable afterwards.
	EPError
	// Bad: a message arrived that the engine could not take (a rendezvous
	// offer, an oversized header, no memory for a copy); Header may tell
	// which conn it was for.
	Bad
	// Done: an operation that reported its end asynchronously (a Flush,
	// or a zero-copy send) finished (Token, Err).
	Done
)

// HeaderMax is how many bytes of a received header an Event keeps.
const HeaderMax = 64

// Event is one thing an engine reports to its Handler. Data and the
// header are valid only during the Handler call, unless held (Hold).
type Event struct {
	Kind    Kind
	Hdr     [HeaderMax]byte // the header as received (its first HeaderMax bytes)
	HdrLen  int             // the header length the sender used
	Data    []byte          // the payload (Frame)
	DataLen int             // the payload length the sender used
	// From identifies the endpoint the frame came from, as the receiving
	// engine knows it (Frame): equal for all frames sent on one endpoint,
	// different for another sender. 0 means unknown.
	From  uintptr
	EP    EP     // the endpoint that failed (EPError)
	Err   error  // why it failed (EPError), or the operation's result (Done; nil: success)
	Token uint64 // the operation's token (Done)

	// Ref is the implementation's handle on Data's memory, for Hold; the
	// zero Ref means Data is ordinary Go memory that stays valid.
	Ref stream.Ref
	// Held is set by Hold: the handler took Data past the batch.
	Held bool
}

// Header returns the received header (nil if the sender's header was longer
// than HeaderMax).
func (e *Event) Header() []byte {
	if e.HdrLen > HeaderMax {
		return nil
	}
	return e.Hdr[:e.HdrLen]
}

// Hold keeps the event's Data valid past the batch. The caller owns it from
// then on and hands the returned Ref back with Engine.Release, once. A zero
// Ref means there is nothing to release (Data is Go memory).
func (e *Event) Hold() stream.Ref {
	if e.Ref.Kind == 0 {
		return stream.Ref{}
	}
	e.Held = true
	return e.Ref
}

// Handler receives an engine's events in batches, on the engine's own
// goroutine. It may call the engine's methods.
type Handler interface {
	HandleEvents(evs []Event)
}

// Ticker is implemented by a Handler that wants to run periodic work on
// the engine goroutine, riding on the wake-ups the engine makes anyway
// (an idle engine wakes every TickEvery at the latest), so that it costs
// no timer of its own.
type Ticker interface {
	Tick(now time.Time)
}

// Combiner is implemented by a Handler that queues small frames while the
// engine is busy (TrySendFrames said so, or BufferedTo shows sends to that
// endpoint waiting) instead of waiting for it, and has them sent by
// whoever holds the engine next: flat combining. After the handler calls
// Engine.Queued, the engine calls Combine, holding its send lock:
//   - with all = true before the next send, flush or endpoint operation
//     anyone makes on it (so that queued frames go out before the
//     caller's), on SendQueued, and once frames have waited a short bound;
//   - with all = false whenever it holds the lock otherwise: the handler
//     may keep the frames for endpoints that are still backed up
//     (s.BufferedTo > 0), to grow them, and reports kept = true if it did.
//
// Combine may be called on any goroutine. It must not block and must send
// only through s: calling the engine's own methods from Combine
// deadlocks.
type Combiner interface {
	Combine(s Sender, all bool) (kept bool)
}

// Sender sends frames on behalf of a Combiner; it is valid only during
// the Combine call it was passed to.
type Sender interface {
	// SendFrames is Engine.SendFrames.
	SendFrames(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (sent int, pending bool, err error)
	// BufferedTo is Engine.BufferedTo.
	BufferedTo(ep EP) uint64
}

// TickEvery is the longest an engine goes without calling Tick while it
// runs.
const TickEvery = 100 * time.Millisecond

// Stats are an engine's counters.
type Stats struct {
	Inflight      uint64 // sends and endpoint closes not completed
	InflightBytes uint64 // payload bytes in buffered sends not completed
	ZCFrames      uint64 // frames sent from the caller's memory
	ImmSends      uint64 // sends completed inline from the caller's memory (no copy)
	Wakeups       uint64 // times the engine slept and woke
	Batches       uint64 // non-empty event batches handled
}

// Engine moves frames: it creates endpoints to peers by address, sends
// header+payload frames on them and reports what arrives to its Handler.
// All methods are safe for concurrent use.
type Engine interface {
	// Address returns the engine's own address, for peers to connect to.
	Address() []byte
	// Connect creates an endpoint to the engine at addr. Implementations
	// validate addr first: it comes from peers and registries.
	Connect(addr []byte) (EP, error)
	// CloseEP starts closing ep: force cancels queued sends, otherwise
	// they are finished first.
	CloseEP(ep EP, force bool) error
	// Flush starts flushing ep: done reports that it finished at once;
	// otherwise a Done event with token follows.
	Flush(ep EP, token uint64) (done bool, err error)
	// Send sends one frame, copied before Send returns.
	Send(ep EP, header, data []byte) error
	// SendFrames sends data as consecutive frames of at most frame bytes,
	// header being a template into which frame i's sequence number
	// (seq+i, 8 bytes LE at seqOff) and length (4 bytes LE at lenOff) are
	// written. It returns how many bytes were handed on, and whether the
	// engine still holds copies of some of them that it has not finished
	// sending (pending: a full transport; they finish with progress).
	SendFrames(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (sent int, pending bool, err error)
	// TrySendFrames is SendFrames if the engine is free at once; ok =
	// false means another goroutine holds it (progressing the worker, or
	// sending) and nothing was sent: the caller may queue the frames and
	// call Queued instead of waiting.
	TrySendFrames(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (sent int, pending, ok bool, err error)
	// Queued tells the engine that its Handler, a Combiner, has queued
	// frames: they go out in the next Combine, run by whoever holds the
	// engine next (the caller itself if the engine is free) — those for an
	// endpoint that is backed up once it has caught up, or after a short
	// bound, so that they grow instead of waiting one by one.
	Queued()
	// SendQueued has the queued frames sent now (a Combine), waiting for
	// the engine if another goroutine holds it.
	SendQueued() error
	// SendFramesZC is SendFrames without copying data: the caller keeps
	// data pinned and unchanged until the engine is done with it — when
	// it returns if wait is false, else when a Done event with token
	// reports it.
	SendFramesZC(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int, token uint64) (sent int, wait bool, err error)
	// Release hands back data held with Event.Hold.
	Release(refs ...stream.Ref)
	// Transports names the transports and devices carrying ep, e.g.
	// "posix/memory" or "tcp/lo" (nil: not known yet).
	Transports(ep EP) []string
	// Buffered returns the payload bytes of sends the engine holds copies
	// of and has not finished (cheap: no lock).
	Buffered() uint64
	// BufferedTo is Buffered for the sends on one endpoint, which must not
	// be closed yet (cheap: no lock): nonzero while that peer, or the path
	// to it, is backed up.
	BufferedTo(ep EP) uint64
	// Stats returns the engine's counters.
	Stats() Stats
	// Close stops the engine, giving what it still owns up to linger to
	// finish. Endpoints are closed first by the caller.
	Close(linger time.Duration) error
}
