package session

// A Transport's counters.

import "sync/atomic"

// counters are a Transport's statistics.
type counters struct {
	dials, accepts, refused                        atomic.Uint64
	framesIn, bytesIn, framesOut, bytesOut         atomic.Uint64
	badFrames, unknownConn, duplicates, resetsSent atomic.Uint64
	resetsRecv, protocolResets, peerFailures       atomic.Uint64
	authFailures, stalledPeers                     atomic.Uint64
	foreignFrames, pingsSent, keepAliveFailures    atomic.Uint64
	idleClosed, queuedWrites, connectsDropped      atomic.Uint64
	keepAliveStopped                               atomic.Uint64
}

// Stats are a Transport's counters.
type Stats struct {
	Dials          uint64 // dials started
	Accepts        uint64 // conns accepted into a listener's queue
	Refused        uint64 // CONNECTs refused (no listener, backlog full, failed authentication)
	FramesIn       uint64 // frames received
	BytesIn        uint64 // payload bytes received
	FramesOut      uint64 // data frames sent
	BytesOut       uint64 // payload bytes sent
	BadFrames      uint64 // frames dropped as malformed
	UnknownConn    uint64 // frames for conn ids this transport does not have
	Duplicates     uint64 // duplicate frames dropped
	ResetsSent     uint64 // RST frames sent
	ResetsReceived uint64 // RST frames received
	ProtocolResets uint64 // conns reset because the peer broke the protocol
	PeerFailures   uint64 // endpoints UCX reported as failed
	AuthFailures   uint64 // handshakes refused for a wrong or missing pre-shared key
	OpenConns      uint64 // conns in the conn table now
	Peers          uint64 // endpoints now
	InflightSends  uint64 // sends whose buffers UCX still owns
	ZeroCopyFrames uint64 // data frames sent straight from the writer's memory (see Config.CopyWrites)
	StalledPeers   uint64 // endpoints force-closed because the peer stopped draining a zero-copy send
	// ForeignFrames counts frames dropped because they named a conn but
	// came from another endpoint than the one the conn was made with.
	ForeignFrames     uint64
	PingsSent         uint64 // keepalive probes sent (see Config.KeepAlive)
	KeepAliveFailures uint64 // peers taken for dead because they stayed silent past KeepAlive
	// KeepAliveStopped counts the times a peer silent past KeepAlive was
	// kept because its process is stopped (a debugger, SIGSTOP) on this
	// host; it is looked at again each KeepAlive.
	KeepAliveStopped uint64
	IdlePeersClosed  uint64 // endpoints closed because no conn used them
	// QueuedWrites counts small writes that found the engine busy or the
	// path to their peer backed up and went into the conn's open frame,
	// sent shortly after, coalesced with the conn's following small
	// writes.
	QueuedWrites uint64
	// ConnectsDropped counts CONNECTs dropped unanswered because
	// answering would have made an endpoint beyond the budget for
	// endpoints made from CONNECTs' addresses: a second address named
	// from one sender's endpoint, or one over the rate (128 at once, 128 a
	// second per Transport). Their dials fail after twice KeepAlive.
	// docs/RELIABILITY.md describes the flood this bounds.
	ConnectsDropped uint64
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
		KeepAliveFailures: s.keepAliveFailures.Load(), KeepAliveStopped: s.keepAliveStopped.Load(),
		IdlePeersClosed: s.idleClosed.Load(),
		QueuedWrites:    s.queuedWrites.Load(), ConnectsDropped: s.connectsDropped.Load(),
	}
}
