package ucxnet

// The statistics of conns and transports, as the session computes them
// (its types have the same fields, in the same order: a conversion
// copies them).

import (
	"time"

	"github.com/ucxnet/ucxnet/internal/session"
)

// The states ConnStats.State names.
const (
	ConnDialing     = session.ConnDialing     // CONNECT sent, no answer yet
	ConnAuthPending = session.ConnAuthPending // accepted, waiting for the dialer's pre-shared-key proof
	ConnOpen        = session.ConnOpen        // established, both directions open
	ConnReadClosed  = session.ConnReadClosed  // the peer closed its writing side (its FIN was received)
	ConnWriteClosed = session.ConnWriteClosed // CloseWrite: this side sent its FIN
	ConnClosing     = session.ConnClosing     // Close sent FIN; waiting for the peer's
	ConnClosed      = session.ConnClosed      // both directions closed
	ConnFailed      = session.ConnFailed      // reset, or the peer failed
)

// ConnStats is a snapshot of one conn (Conn.Stats, Transport.Conns). Its
// JSON form is what `ucxnet ls --json` prints.
type ConnStats struct {
	ID     uint64 `json:"id"`     // the conn's id at this end
	Local  string `json:"local"`  // LocalAddr().String()
	Remote string `json:"remote"` // RemoteAddr().String()
	Dialed bool   `json:"dialed"` // made by Dial (else accepted)
	// Lane is "ucx" or "tcp" (a kernel TCP connection), LaneReason why the
	// conn is on it (see Conn.Lane).
	Lane       string `json:"lane"`
	LaneReason string `json:"lane_reason"`
	// Transports are the UCX transports and devices carrying the conn
	// (Conn.Transports); "tcp(kernel)" on the kernel-TCP lane.
	Transports []string `json:"transports"`
	State      string   `json:"state"` // one of the Conn* state names
	// BytesIn and BytesOut count payload bytes received from the peer
	// (read or not) and written to it (handed to the transport, or queued
	// in the conn's open frame), whichever path moved them: on the
	// kernel-TCP lane the kernel counts them (sendfile and splice through
	// ReadFrom and WriteTo included). FramesIn and FramesOut count the data
	// frames that carried them on the UCX lane; the kernel-TCP lane has
	// no frames (0).
	BytesIn   uint64 `json:"bytes_in"`
	BytesOut  uint64 `json:"bytes_out"`
	FramesIn  uint64 `json:"frames_in"`
	FramesOut uint64 `json:"frames_out"`
	// SendWindow is how many bytes the peer's receive window lets this
	// side send now; RecvWindow is the window this side grants the peer;
	// Unread counts bytes received but not yet read; Queued counts bytes
	// written but still in the conn's open frame (not yet handed to UCX).
	// UCX lane only: 0 on the kernel-TCP lane, where the kernel keeps them.
	SendWindow uint64 `json:"send_window"`
	RecvWindow uint64 `json:"recv_window"`
	Unread     uint64 `json:"unread"`
	Queued     uint64 `json:"queued"`
	// Age is how long ago the conn was made.
	Age time.Duration `json:"age_ns"`
	// RTT is the round trip to the peer: on the UCX lane that of the
	// peer's last answered keepalive PING (per peer, sent only when the
	// peer has been silent for a while: see Config.KeepAlive), on the
	// kernel-TCP lane the kernel's minimum over its recent samples
	// (tcpi_min_rtt: the path's, without the peer's delayed ACKs, the same
	// at both ends). 0: not measured yet.
	RTT time.Duration `json:"rtt_ns"`
}

// Stats are a Transport's counters: conns dialed, accepted and refused,
// frames and bytes each way, and the failures and drops it saw.
type Stats struct {
	Dials          uint64 `json:"dials"`            // dials started
	Accepts        uint64 `json:"accepts"`          // conns accepted into a listener's queue
	Refused        uint64 `json:"refused"`          // CONNECTs refused (no listener, backlog full, failed authentication)
	FramesIn       uint64 `json:"frames_in"`        // frames received
	BytesIn        uint64 `json:"bytes_in"`         // payload bytes received
	FramesOut      uint64 `json:"frames_out"`       // data frames sent
	BytesOut       uint64 `json:"bytes_out"`        // payload bytes sent
	BadFrames      uint64 `json:"bad_frames"`       // frames dropped as malformed
	UnknownConn    uint64 `json:"unknown_conn"`     // frames for conn ids this transport does not have
	Duplicates     uint64 `json:"duplicates"`       // duplicate frames dropped
	ResetsSent     uint64 `json:"resets_sent"`      // RST frames sent
	ResetsReceived uint64 `json:"resets_received"`  // RST frames received
	ProtocolResets uint64 `json:"protocol_resets"`  // conns reset because the peer broke the protocol
	PeerFailures   uint64 `json:"peer_failures"`    // endpoints UCX reported as failed
	AuthFailures   uint64 `json:"auth_failures"`    // handshakes refused for a wrong or missing pre-shared key
	OpenConns      uint64 `json:"open_conns"`       // conns in the conn table now
	Peers          uint64 `json:"peers"`            // endpoints now
	InflightSends  uint64 `json:"inflight_sends"`   // sends whose buffers UCX still owns
	ZeroCopyFrames uint64 `json:"zero_copy_frames"` // data frames sent straight from the writer's memory (see Config.CopyWrites)
	StalledPeers   uint64 `json:"stalled_peers"`    // endpoints force-closed because the peer stopped draining a zero-copy send
	// ForeignFrames counts frames dropped because they named a conn but
	// came from another endpoint than the one the conn was made with.
	ForeignFrames     uint64 `json:"foreign_frames"`
	PingsSent         uint64 `json:"pings_sent"`          // keepalive probes sent (see Config.KeepAlive)
	KeepAliveFailures uint64 `json:"keep_alive_failures"` // peers taken for dead because they stayed silent past KeepAlive
	// KeepAliveKernel counts the times a peer that keepalive would have
	// failed was kept because the kernel channel says its process lives
	// on this host (stopped, frozen or starved).
	KeepAliveKernel uint64 `json:"keep_alive_kernel"`
	// PeersExited counts the peers failed because the kernel channel
	// said their process exited.
	PeersExited     uint64 `json:"peers_exited"`
	IdlePeersClosed uint64 `json:"idle_peers_closed"` // endpoints closed because no conn used them
	// QueuedWrites counts small writes that found the engine busy or the
	// path to their peer backed up and went into the conn's open frame,
	// sent shortly after, coalesced with the conn's following small
	// writes.
	QueuedWrites uint64 `json:"queued_writes"`
	// ConnectsDropped counts CONNECTs dropped unanswered because
	// answering would have made an endpoint beyond the budget for
	// endpoints made from CONNECTs' addresses: a second address named
	// from one sender's endpoint, or one over the rate (128 at once, 128 a
	// second per Transport). Their dials fail after twice KeepAlive.
	// docs/RELIABILITY.md describes the flood this bounds.
	ConnectsDropped uint64 `json:"connects_dropped"`
	// PeersFlooded counts the peers failed for sending more frames that
	// carry no stream data (PINGs, WINDOWs granting under 1 KiB,
	// duplicates, malformed frames, frames other than data for conns
	// that are not theirs) than their budget allows: 16,384 at once,
	// 4,096 a second; their endpoints are closed and their CONNECTs
	// dropped for a minute. It also counts endpoints whose CONNECTs are
	// dropped undecoded for flooding the listener with them.
	PeersFlooded uint64 `json:"peers_flooded"`
}

// LaneStats are a Transport's kernel-TCP lane counters: the conns on the
// lane now and the preambles refused.
type LaneStats struct {
	OpenConns uint64 `json:"open_conns"` // conns on the TCP lane now
	// Garbage counts TCP conns closed because their first bytes were not
	// a ucxnet preamble (a port scanner, another protocol).
	Garbage uint64 `json:"garbage"`
	// Oversized counts preambles whose fields were out of bounds.
	Oversized uint64 `json:"oversized"`
	// Timeouts counts preambles not done within the handshake timeout
	// (or cut short by the dialer).
	Timeouts uint64 `json:"timeouts"`
	// OverCap counts TCP conns closed at once because the listener
	// already had 64 conns in their preamble.
	OverCap uint64 `json:"over_cap"`
}

// LaneInfo says which lane a dial to a name would take, and why
// (Transport.LaneTo, for `ucxnet info` and demo). It resolves the name but
// connects to nothing.
type LaneInfo struct {
	Lane      string   `json:"lane"`      // LaneUCX or LaneTCP; "" when neither reaches the peer
	Reason    string   `json:"reason"`    // why (or why neither)
	Endpoints []string `json:"endpoints"` // the TCP endpoints the entry publishes that a dial would try
}

// Snapshot is the state of one transport: its counters, listeners and
// conns (at most MaxSnapshotConns). Its JSON form is a stats socket's
// answer (see StatsDir) and what PublishExpvar publishes.
type Snapshot struct {
	PID       int       `json:"pid"`
	Program   string    `json:"program"`   // the process's executable name
	Transport string    `json:"transport"` // Transport.Name
	Listeners []string  `json:"listeners"` // the names it listens on
	Stats     Stats     `json:"stats"`
	Lane      LaneStats `json:"lane"` // the kernel-TCP lane's counters
	// Conns are the transport's conns, oldest first, at most
	// MaxSnapshotConns; ConnsOmitted counts those left out.
	Conns        []ConnStats `json:"conns"`
	ConnsOmitted int         `json:"conns_omitted,omitempty"`
}

// connStats returns the session's conn snapshots as ucxnet's.
func connStats(ss []session.ConnStats) []ConnStats {
	if ss == nil {
		return nil
	}
	out := make([]ConnStats, len(ss))
	for i, s := range ss {
		out[i] = ConnStats(s)
	}
	return out
}

// snapshot returns the session's transport snapshot as ucxnet's.
func snapshot(s session.Snapshot) Snapshot {
	return Snapshot{PID: s.PID, Program: s.Program, Transport: s.Transport, Listeners: s.Listeners,
		Stats: Stats(s.Stats), Lane: LaneStats(s.Lane), Conns: connStats(s.Conns), ConnsOmitted: s.ConnsOmitted}
}
