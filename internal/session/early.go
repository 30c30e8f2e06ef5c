package session

import (
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// Bounds of the frames a dialing stream keeps before its ACCEPT, per
// endpoint they come from (EarlyFrame.From).
const (
	// MaxEarly bounds the frames kept from one endpoint. The listener may
	// send its whole first window before the ACCEPT arrives (UCX's tcp
	// transport delivered an ACCEPT behind a WINDOW and 4 MiB of DATA
	// sent after it: TestStallEarlyFrames), in frames as small as its
	// writes.
	MaxEarly = 1024
	// maxEarlySources bounds the endpoints whose frames are kept: the
	// listener's, and a few that claim the conn id (a third party's).
	maxEarlySources = 4
	// maxEarlyLost bounds the endpoints whose lost frames are remembered
	// one by one; past it every endpoint counts as having lost frames.
	maxEarlyLost = 16
)

// EarlyFrame is a frame for a dialed stream that arrived before its
// ACCEPT.
type EarlyFrame struct {
	Header stream.Header
	Data   []byte  // a copy of the payload
	From   uintptr // the endpoint it came from (engine.Event.From)
}

// Early holds the frames for a dialed stream that arrive before its ACCEPT
// (UCX does not order active messages) until the ACCEPT says which
// endpoint the listener's frames come from: from each endpoint at most
// MaxEarly frames and no more payload than the stream's receive window
// (all an honest listener may send before it hears from the dialer), from
// at most maxEarlySources endpoints. A frame over those bounds is not
// kept, and its endpoint is remembered as one that lost frames: if it
// turns out to be the listener's, the stream has a gap, and the conn
// must fail rather than wait behind it (Lost). Its owner is the engine
// goroutine that receives for the stream; it does no locking.
type Early struct {
	frames  []EarlyFrame
	kept    map[uintptr]earlyUse // by endpoint: what its kept frames use
	lost    map[uintptr]int      // by endpoint: frames not kept
	lostAll bool                 // more endpoints lost frames than lost holds
}

// earlyUse is what one endpoint's kept frames use of the bounds.
type earlyUse struct{ frames, bytes int }

// Stash keeps a copy of the frame h that ev carries, within a window of
// window bytes for its endpoint; it reports false, keeping nothing and
// remembering the endpoint as one that lost a frame, when the frame is
// over the bounds.
func (e *Early) Stash(h stream.Header, ev *engine.Event, window int) bool {
	u, known := e.kept[ev.From]
	if !known && len(e.kept) >= maxEarlySources || u.frames >= MaxEarly || u.bytes+len(ev.Data) > window {
		e.loseFrom(ev.From)
		return false
	}
	if e.kept == nil {
		e.kept = make(map[uintptr]earlyUse)
	}
	e.kept[ev.From] = earlyUse{u.frames + 1, u.bytes + len(ev.Data)}
	e.frames = append(e.frames, EarlyFrame{Header: h, Data: append([]byte(nil), ev.Data...), From: ev.From})
	return true
}

// loseFrom remembers that a frame from the endpoint from was not kept.
func (e *Early) loseFrom(from uintptr) {
	if _, ok := e.lost[from]; !ok && len(e.lost) >= maxEarlyLost {
		e.lostAll = true
		return
	}
	if e.lost == nil {
		e.lost = make(map[uintptr]int)
	}
	e.lost[from]++
}

// Lost returns how many frames from the endpoint from were not kept; -1
// means not known, but maybe some (too many endpoints lost frames to
// remember each).
func (e *Early) Lost(from uintptr) int {
	if n := e.lost[from]; n > 0 {
		return n
	}
	if e.lostAll {
		return -1
	}
	return 0
}

// Take returns the frames kept, oldest first, and forgets them and the
// bounds' use (not the endpoints that lost frames).
func (e *Early) Take() []EarlyFrame {
	f := e.frames
	e.frames, e.kept = nil, nil
	return f
}
