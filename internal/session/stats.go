package session

// A Transport's counters.

import (
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// counters are a Transport's statistics.
type counters struct {
	dials, accepts, refused                        atomic.Uint64
	framesIn, bytesIn, framesOut, bytesOut         atomic.Uint64
	badFrames, unknownConn, duplicates, resetsSent atomic.Uint64
	resetsRecv, protocolResets, peerFailures       atomic.Uint64
	authFailures, stalledPeers                     atomic.Uint64
	foreignFrames, pingsSent, keepAliveFailures    atomic.Uint64
	idleClosed, queuedWrites, connectsDropped      atomic.Uint64
	keepAliveKernel, peersExited, peersFlooded     atomic.Uint64
}

// Stats are a Transport's counters. Its fields mean what ucxnet.Stats's
// do: ucxnet converts one to the other, so the two have the same fields in
// the same order.
type Stats struct {
	Dials             uint64 `json:"dials"`
	Accepts           uint64 `json:"accepts"`
	Refused           uint64 `json:"refused"`
	FramesIn          uint64 `json:"frames_in"`
	BytesIn           uint64 `json:"bytes_in"`
	FramesOut         uint64 `json:"frames_out"`
	BytesOut          uint64 `json:"bytes_out"`
	BadFrames         uint64 `json:"bad_frames"`
	UnknownConn       uint64 `json:"unknown_conn"`
	Duplicates        uint64 `json:"duplicates"`
	ResetsSent        uint64 `json:"resets_sent"`
	ResetsReceived    uint64 `json:"resets_received"`
	ProtocolResets    uint64 `json:"protocol_resets"`
	PeerFailures      uint64 `json:"peer_failures"`
	AuthFailures      uint64 `json:"auth_failures"`
	OpenConns         uint64 `json:"open_conns"`
	Peers             uint64 `json:"peers"`
	InflightSends     uint64 `json:"inflight_sends"`
	ZeroCopyFrames    uint64 `json:"zero_copy_frames"`
	StalledPeers      uint64 `json:"stalled_peers"`
	ForeignFrames     uint64 `json:"foreign_frames"`
	PingsSent         uint64 `json:"pings_sent"`
	KeepAliveFailures uint64 `json:"keep_alive_failures"`
	KeepAliveKernel   uint64 `json:"keep_alive_kernel"`
	PeersExited       uint64 `json:"peers_exited"`
	IdlePeersClosed   uint64 `json:"idle_peers_closed"`
	QueuedWrites      uint64 `json:"queued_writes"`
	ConnectsDropped   uint64 `json:"connects_dropped"`
	PeersFlooded      uint64 `json:"peers_flooded"`
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	t.mu.RLock()
	open, peers := len(t.conns), 0
	for _, sh := range t.shards {
		peers += len(sh.peers)
	}
	t.mu.RUnlock()
	es := t.engineStats()
	return Stats{
		Dials: s.dials.Load(), Accepts: s.accepts.Load(), Refused: s.refused.Load(),
		FramesIn: s.framesIn.Load(), BytesIn: s.bytesIn.Load(),
		FramesOut: s.framesOut.Load(), BytesOut: s.bytesOut.Load(),
		BadFrames: s.badFrames.Load(), UnknownConn: s.unknownConn.Load(),
		Duplicates: s.duplicates.Load(), ResetsSent: s.resetsSent.Load(),
		ResetsReceived: s.resetsRecv.Load(), ProtocolResets: s.protocolResets.Load(),
		PeerFailures: s.peerFailures.Load(), AuthFailures: s.authFailures.Load(), OpenConns: uint64(open), Peers: uint64(peers),
		InflightSends: es.Inflight, ZeroCopyFrames: es.ZCFrames, StalledPeers: s.stalledPeers.Load(),
		ForeignFrames: s.foreignFrames.Load(), PingsSent: s.pingsSent.Load(),
		KeepAliveFailures: s.keepAliveFailures.Load(), KeepAliveKernel: s.keepAliveKernel.Load(), PeersExited: s.peersExited.Load(),
		IdlePeersClosed: s.idleClosed.Load(),
		QueuedWrites:    s.queuedWrites.Load(), ConnectsDropped: s.connectsDropped.Load(),
		PeersFlooded: s.peersFlooded.Load(),
	}
}

// Conns returns a snapshot of every conn of the transport: dialing,
// waiting for Accept, open, or closed and waiting for the peer's FIN.
// Conns that are finished (both sides closed, reset or failed) are not
// listed. The oldest come first.
func (t *Transport) Conns() []ConnStats {
	type bornStream struct {
		born time.Time
		s    Stream
	}
	t.mu.RLock()
	cs := make([]bornStream, 0, len(t.conns))
	for _, c := range t.conns {
		cs = append(cs, bornStream{c.born, c})
	}
	t.mu.RUnlock()
	t.lanes.mu.Lock()
	for c := range t.lanes.conns {
		cs = append(cs, bornStream{c.born, c})
	}
	t.lanes.mu.Unlock()
	// By birth, not by the ages Stats computes one after the other: a
	// conn's age read later can pass an older conn's read earlier.
	slices.SortStableFunc(cs, func(a, b bornStream) int { return a.born.Compare(b.born) })
	out := make([]ConnStats, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.s.Stats())
	}
	return out
}

// Snapshot returns the transport's state now.
func (t *Transport) Snapshot() Snapshot {
	t.mu.RLock()
	ls := make([]string, 0, len(t.listeners))
	for name := range t.listeners {
		ls = append(ls, name)
	}
	t.mu.RUnlock()
	slices.Sort(ls)
	s := Snapshot{PID: os.Getpid(), Program: filepath.Base(os.Args[0]), Transport: t.name, Listeners: ls,
		Stats: t.Stats(), Lane: t.LaneStats(), Conns: t.Conns()}
	if n := len(s.Conns); n > MaxSnapshotConns {
		s.Conns, s.ConnsOmitted = s.Conns[:MaxSnapshotConns], n-MaxSnapshotConns
	}
	return s
}

// LaneStats returns the kernel-TCP lane's counters.
func (t *Transport) LaneStats() LaneStats {
	t.lanes.mu.Lock()
	n := len(t.lanes.conns)
	t.lanes.mu.Unlock()
	return LaneStats{OpenConns: uint64(n), Garbage: t.lanes.Garbage.Load(), Oversized: t.lanes.Oversized.Load(),
		Timeouts: t.lanes.Timeouts.Load(), OverCap: t.lanes.OverCap.Load()}
}
