package ucxnet

import "fmt"

// connState is where a conn is in its life: its phase and, once open,
// which of its halves are shut and by whom. The conn's mu guards it.
type connState struct {
	phase  connPhase
	finIn  bool // the peer's FIN was delivered: all it sent is in order
	finOut bool // our FIN was sent
	wshut  bool // CloseWrite was called: no more writes
	closed bool // Close was called
	// finWait: Close sent its FIN (or found the conn finished) and left the
	// conn in the table for the peer's FIN; the receive side removes it.
	finWait bool
}

// connPhase is a conn's phase.
type connPhase uint8

// Conn phases.
const (
	stateDialing     connPhase = iota // CONNECT sent, waiting for ACCEPT/REFUSE (and, with a key, the listener's proof)
	stateAbandoned                    // the dialer gave up; reset whatever answer comes
	stateOpen                         // established
	stateDone                         // reset, failed, or closed and finished
	stateAuthPending                  // accepted, waiting for the dialer's pre-shared-key proof
)

var stateNames = [...]string{
	stateDialing:     "dialing",
	stateAbandoned:   "abandoned",
	stateOpen:        "open",
	stateDone:        "done",
	stateAuthPending: "auth-pending",
}

// String returns the phase's name.
func (s connPhase) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("connPhase(%d)", uint8(s))
}

// windowOpen reports whether the peer may still send: open, its FIN not
// yet delivered. WINDOW updates are worth sending only then.
func (s connState) windowOpen() bool { return s.phase == stateOpen && !s.finIn }

// finished reports whether nothing more is to come from the peer, once
// our FIN went: its FIN was delivered, or the conn is not open.
func (s connState) finished() bool { return s.finIn || s.phase != stateOpen }

// name names the state for ConnStats; failed: the conn ended with an
// error.
func (s connState) name(failed bool) string {
	switch s.phase {
	case stateDialing, stateAbandoned:
		return ConnDialing
	case stateAuthPending:
		return ConnAuthPending
	case stateDone:
		if failed && !s.closed {
			return ConnFailed
		}
		return ConnClosed
	}
	wclosed := s.finOut || s.wshut
	switch {
	case s.closed && s.finWait:
		return ConnClosing
	case s.closed, wclosed && s.finIn:
		return ConnClosed
	case wclosed:
		return ConnWriteClosed
	case s.finIn:
		return ConnReadClosed
	}
	return ConnOpen
}
