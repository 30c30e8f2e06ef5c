package session

import "github.com/ucxnet/ucxnet/internal/stream"

// RSTChoice says when ending a stream tells the peer with an RST.
type RSTChoice uint8

// The choices.
const (
	RSTNever  RSTChoice = iota // the peer already knows, or cannot be told
	RSTIfOpen                  // RST only if the stream is open (the peer knows it as established)
	RSTAlways                  // RST whatever the phase: the peer has a stream waiting for our answer
)

// EndPolicy is what ending a stream does besides failing it locally: one
// end for every cause (a local Close with data unread, the peer's RST or
// failure, a protocol error, a failed send, the handshake's refusals, the
// transport's Close), with a policy for what the cause owes the peer and
// the application.
type EndPolicy struct {
	RST  RSTChoice      // whether the peer gets RST(Code) (never without its stream id)
	Code stream.RstCode // the RST's code
	// Discard drops the data received and not yet read; otherwise it
	// stays readable, moved to Go memory, before the error.
	Discard bool
	// DialErr, if set, is what a dial still waiting for its answer gets
	// instead of the error.
	DialErr error
}

// EndQuiet fails a stream locally: the peer is not told, unread data
// stays readable.
var EndQuiet = EndPolicy{}

// EndGap ends a stream that has a gap on this side (a send of its data
// failed): the peer would wait for the missing bytes for ever, so it gets
// an RST (best effort: the endpoint may be what failed); data already
// received stays readable.
var EndGap = EndPolicy{RST: RSTIfOpen, Code: stream.RstAbort}

// EndReset resets a stream: unread data is dropped and the peer gets
// RST(code) as rst says.
func EndReset(code stream.RstCode, rst RSTChoice) EndPolicy {
	return EndPolicy{RST: rst, Code: code, Discard: true}
}

// TellsPeer reports whether ending a stream in state s (not yet done)
// sends the peer an RST; known: the peer's stream id is known.
func (p EndPolicy) TellsPeer(s State, known bool) bool {
	return known && (p.RST == RSTAlways || p.RST == RSTIfOpen && s.Phase == PhaseOpen)
}

// Err returns what ending a stream in state s with err leaves its waiters
// with: DialErr for a dial still waiting for its answer, if set, else err.
func (p EndPolicy) Err(s State, err error) error {
	if p.DialErr != nil && s.Phase == PhaseDialing {
		return p.DialErr
	}
	return err
}
