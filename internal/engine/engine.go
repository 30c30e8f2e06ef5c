// Package engine is the boundary between ucxnet's conn logic and whatever
// moves its frames: the vocabulary (endpoints, received frames, events,
// sends) and the Engine, Worker and Handler interfaces that the conn logic
// in package ucxnet depends on: twelve methods in all.
//
// Two implementations exist: package progress drives a real UCX worker
// (cgo), and package engine/memengine moves frames between engines in one
// process's memory, with hooks to drop, duplicate, reorder and inject
// frames, so that conn behaviour tests run without UCX (CGO_ENABLED=0
// included). Package engine/enginetest checks the contract both keep. This
// package itself is pure Go and knows nothing of UCX.
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
	// Tick: time for periodic work. An engine that runs delivers one at
	// least every TickEvery, riding on the wake-ups it makes anyway, so
	// that the handler needs no timer of its own.
	Tick
	// Writable: what waited for the engine may go now: the worker was
	// given back after an Acquire(false) found it held, or sends that the
	// engine held copies of completed (EP: their endpoint, if one is
	// known; the zero EP: any endpoint's backlog may have shrunk).
	Writable
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
// goroutine, without the worker held: it may Acquire it to send, and
// writers may send meanwhile. Data received stays valid during the call.
type Handler interface {
	HandleEvents(evs []Event)
}

// TickEvery is the longest an engine goes without a Tick event while it
// runs.
const TickEvery = 100 * time.Millisecond

// Stats are an engine's counters, or one endpoint's backlog and path
// (Engine.Stats).
type Stats struct {
	// Backlog is the payload bytes of sends the engine holds copies of
	// and has not finished: to the endpoint asked about (nonzero while
	// that peer, or the path to it, is backed up), or to all of them.
	Backlog uint64
	// Transports names the transports and devices carrying the endpoint
	// asked about, e.g. "posix/memory" or "tcp/lo" (nil: all endpoints
	// were asked about, or not known yet).
	Transports []string

	Inflight uint64 // sends and endpoint closes not completed
	ZCFrames uint64 // frames sent from the caller's memory
	ImmSends uint64 // sends completed inline from the caller's memory (no copy)
	Wakeups  uint64 // times the engine slept and woke
	Batches  uint64 // non-empty event batches handled
}

// Frames is a send: Data as consecutive frames of at most Frame bytes,
// each behind Header with the frame's sequence number (Seq for the first,
// then one more each: 8 bytes little-endian at SeqOff) and payload length
// (4 bytes little-endian at LenOff) written into it; Send may write them
// into Header itself, which is scratch during the call. Frame zero sends
// Data as one frame behind Header as it is.
type Frames struct {
	Header         []byte
	SeqOff, LenOff int
	Seq            uint64
	Data           []byte
	Frame          int
	// ZeroCopy sends from Data itself instead of a copy: the caller keeps
	// Data pinned and unchanged until the engine is done with it (when
	// Send returns, unless it reports pending: then when a Done event
	// carrying Token says so).
	ZeroCopy bool
	Token    uint64
}

// Engine moves frames between workers: a peer is known by its worker's
// address, reached through an endpoint made from it, and what arrives is
// reported to the engine's Handler. Sends, flushes and endpoint
// operations go through the engine's Worker, which one goroutine holds at
// a time (Acquire). All methods are safe for concurrent use.
//
// The seam is twelve methods in all, over three interfaces: Engine (6),
// Worker (5) and Handler (1). Periodic work and writability are event
// kinds (Tick, Writable), not methods. Engines do not queue or coalesce
// frames: a caller that finds the worker held (Acquire(false) reports nil)
// keeps its frames and sends them when it, or whoever holds the worker
// next, can (a Writable event says when).
type Engine interface {
	// Address returns the engine's own address, for peers to connect to.
	Address() []byte
	// Acquire takes the engine's worker, waiting for it if another
	// goroutine holds it and wait is set; without wait it returns nil
	// when the worker is held (by any goroutine, the caller included) or
	// the engine is backed up (for an engine that simulates it), and a
	// Writable event follows once it is given back: so a holder may ask
	// for one. The caller gives the worker back with Worker.GiveBack.
	Acquire(wait bool) Worker
	// Stats returns the engine's counters and Backlog (for the zero EP),
	// or ep's Backlog and Transports. It never waits for the worker, and
	// may be called holding it. ep must not be closed yet.
	Stats(ep EP) Stats
	// Backlog is Stats(ep).Backlog alone, read as cheaply as the engine
	// can: writers check it on every write. It never waits for the
	// worker, and may be called holding it. ep must not be closed yet.
	Backlog(ep EP) uint64
	// Release hands back data held with Event.Hold.
	Release(refs ...stream.Ref)
	// Close stops the engine, giving what it still owns up to linger to
	// finish. Endpoints are closed first by the caller.
	Close(linger time.Duration) error
}

// Worker does an engine's sends and endpoint operations, for the one
// goroutine that holds it (Engine.Acquire). Its methods return an error
// once the engine is closed.
type Worker interface {
	// Connect creates an endpoint to the engine at addr. Implementations
	// validate addr first: it comes from peers and registries.
	Connect(addr []byte) (EP, error)
	// Send sends f on ep. It returns how many bytes of f.Data were handed
	// on, and pending: the engine has not finished with some of them
	// (it holds copies it has not sent yet, a full transport; or, for a
	// zero-copy send, a Done event with f.Token follows).
	Send(ep EP, f Frames) (sent int, pending bool, err error)
	// Flush starts flushing ep: done reports that it finished at once;
	// otherwise a Done event with token follows.
	Flush(ep EP, token uint64) (done bool, err error)
	// CloseEP starts closing ep: force cancels queued sends, otherwise
	// they are finished first. ep must not be used afterwards.
	CloseEP(ep EP, force bool) error
	// GiveBack gives the worker back; the Worker must not be used after.
	GiveBack()
}
