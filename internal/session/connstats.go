package session

// Per-conn statistics: Conn.Stats and Transport.Conns.

import (
	"sync/atomic"
	"time"

	"github.com/ucxnet/ucxnet/internal/lane"
)

// connCounters are a conn's data counters: atomic adds on the data path,
// read by Stats.
type connCounters struct {
	bytesIn, bytesOut, framesIn, framesOut atomic.Uint64
}

// The states ConnStats.State names.
const (
	ConnDialing     = "dialing"      // CONNECT sent, no answer yet
	ConnAuthPending = "auth-pending" // accepted, waiting for the dialer's pre-shared-key proof
	ConnOpen        = "open"         // established, both directions open
	ConnReadClosed  = "read-closed"  // the peer closed its writing side (its FIN was received)
	ConnWriteClosed = "write-closed" // CloseWrite: this side sent its FIN
	ConnClosing     = "closing"      // Close sent FIN; waiting for the peer's
	ConnClosed      = "closed"       // both directions closed
	ConnFailed      = "failed"       // reset, or the peer failed
)

// ConnStats is a snapshot of one conn (Conn.Stats, Transport.Conns). Its
// fields and JSON tags mean what ucxnet.ConnStats's do: ucxnet converts
// one to the other, so the two have the same fields in the same order.
type ConnStats struct {
	ID         uint64        `json:"id"`
	Local      string        `json:"local"`
	Remote     string        `json:"remote"`
	Dialed     bool          `json:"dialed"`
	Lane       string        `json:"lane"`
	LaneReason string        `json:"lane_reason"`
	Transports []string      `json:"transports"`
	State      string        `json:"state"`
	BytesIn    uint64        `json:"bytes_in"`
	BytesOut   uint64        `json:"bytes_out"`
	FramesIn   uint64        `json:"frames_in"`
	FramesOut  uint64        `json:"frames_out"`
	SendWindow uint64        `json:"send_window"`
	RecvWindow uint64        `json:"recv_window"`
	Unread     uint64        `json:"unread"`
	Queued     uint64        `json:"queued"`
	Age        time.Duration `json:"age_ns"`
	RTT        time.Duration `json:"rtt_ns"`
}

// stateName names a conn's state (State) for ConnStats; failed:
// the conn ended with an error.
func stateName(s State, failed bool) string {
	switch s.Phase {
	case PhaseDialing, PhaseAbandoned:
		return ConnDialing
	case PhaseAuthPending:
		return ConnAuthPending
	case PhaseDone:
		if failed && !s.Closed {
			return ConnFailed
		}
		return ConnClosed
	}
	switch {
	case s.Closed && s.FinWait:
		return ConnClosing
	case s.Closed, s.WriteClosed() && s.FinIn:
		return ConnClosed
	case s.WriteClosed():
		return ConnWriteClosed
	case s.FinIn:
		return ConnReadClosed
	}
	return ConnOpen
}

// laneState names a kernel-TCP lane conn's state for Stats.
func laneState(tl *lane.Conn, closed bool) string {
	w, r := tl.WriteShut(), tl.EOF()
	switch {
	case closed && !w:
		return ConnFailed
	case w && r, closed:
		return ConnClosed
	case w:
		return ConnWriteClosed
	case r:
		return ConnReadClosed
	}
	return ConnOpen
}

// notePong records the round trip of the peer's answer to our last PING
// (the first answer only: a second one for the same PING says nothing).
func (p *peer) notePong(now time.Time) {
	if sent := p.rttProbe.Swap(0); sent != 0 {
		if rtt := now.UnixNano() - sent; rtt > 0 {
			p.rtt.Store(rtt)
		}
	}
}
