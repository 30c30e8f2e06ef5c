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
	keepAliveKernel, peersExited                   atomic.Uint64
}

// Stats are a Transport's counters. Its fields mean what ucxnet.Stats's
// do: ucxnet converts one to the other, so the two have the same fields in
// the same order.
type Stats struct {
	Dials             uint64
	Accepts           uint64
	Refused           uint64
	FramesIn          uint64
	BytesIn           uint64
	FramesOut         uint64
	BytesOut          uint64
	BadFrames         uint64
	UnknownConn       uint64
	Duplicates        uint64
	ResetsSent        uint64
	ResetsReceived    uint64
	ProtocolResets    uint64
	PeerFailures      uint64
	AuthFailures      uint64
	OpenConns         uint64
	Peers             uint64
	InflightSends     uint64
	ZeroCopyFrames    uint64
	StalledPeers      uint64
	ForeignFrames     uint64
	PingsSent         uint64
	KeepAliveFailures uint64
	KeepAliveKernel   uint64
	PeersExited       uint64
	IdlePeersClosed   uint64
	QueuedWrites      uint64
	ConnectsDropped   uint64
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
	}
}
