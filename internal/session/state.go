package session

import "fmt"

// State is where a stream is in its life: its phase and, once open, which
// of its halves are shut and by whom. The stream's lock guards it.
type State struct {
	Phase  Phase
	FinIn  bool // the peer's FIN was delivered: all it sent is in order
	FinOut bool // our FIN was sent
	WShut  bool // CloseWrite was called: no more writes
	Closed bool // Close was called
	// FinWait: Close sent its FIN (or found the stream finished) and left
	// the stream in the table for the peer's FIN; the receive side removes
	// it.
	FinWait bool
}

// Phase is a stream's phase.
type Phase uint8

// The phases.
const (
	PhaseDialing     Phase = iota // CONNECT sent, waiting for ACCEPT/REFUSE (and, with a key, the listener's proof)
	PhaseAbandoned                // the dialer gave up; reset whatever answer comes
	PhaseOpen                     // established
	PhaseDone                     // reset, failed, or closed and finished
	PhaseAuthPending              // accepted, waiting for the dialer's pre-shared-key proof
)

var phaseNames = [...]string{
	PhaseDialing:     "dialing",
	PhaseAbandoned:   "abandoned",
	PhaseOpen:        "open",
	PhaseDone:        "done",
	PhaseAuthPending: "auth-pending",
}

// String returns the phase's name.
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// WindowOpen reports whether the peer may still send: open, its FIN not
// yet delivered. WINDOW updates are worth sending only then.
func (s State) WindowOpen() bool { return s.Phase == PhaseOpen && !s.FinIn }

// Finished reports whether nothing more is to come from the peer, once
// our FIN went: its FIN was delivered, or the stream is not open.
func (s State) Finished() bool { return s.FinIn || s.Phase != PhaseOpen }

// WriteClosed reports whether this side's writing half is shut: CloseWrite
// was called or our FIN went.
func (s State) WriteClosed() bool { return s.FinOut || s.WShut }
