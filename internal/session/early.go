package session

import (
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// MaxEarly bounds the frames a dialing stream keeps before its ACCEPT.
const MaxEarly = 64

// EarlyFrame is a frame for a dialed stream that arrived before its
// ACCEPT.
type EarlyFrame struct {
	Header stream.Header
	Data   []byte  // a copy of the payload
	From   uintptr // the endpoint it came from (engine.Event.From)
}

// Early holds the frames for a dialed stream that arrive before its ACCEPT
// (UCX does not order active messages) until the ACCEPT says which
// endpoint the listener's frames come from: at most MaxEarly frames, and
// no more payload than the stream's receive window. Its owner is the
// engine goroutine that receives for the stream; it does no locking.
type Early struct {
	frames []EarlyFrame
	bytes  int
}

// Stash keeps a copy of the frame h that ev carries, within a window of
// window bytes; it reports false, keeping nothing, when the frame is over
// the bounds.
func (e *Early) Stash(h stream.Header, ev *engine.Event, window int) bool {
	if len(e.frames) >= MaxEarly || e.bytes+len(ev.Data) > window {
		return false
	}
	e.frames = append(e.frames, EarlyFrame{Header: h, Data: append([]byte(nil), ev.Data...), From: ev.From})
	e.bytes += len(ev.Data)
	return true
}

// Take returns the frames kept, oldest first, and forgets them.
func (e *Early) Take() []EarlyFrame {
	f := e.frames
	e.frames, e.bytes = nil, 0
	return f
}
