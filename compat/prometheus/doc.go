// Package ucxprom exports ucxnet transports' statistics to Prometheus: a
// prometheus.Collector (client_golang) over one or more Transports, or
// over every open Transport of the process.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(ucxprom.NewCollector()) // every open transport, at each scrape
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// It is a nested module (github.com/ucxnet/ucxnet/compat/prometheus) so
// that the core module does not depend on client_golang.
//
// # Series
//
// Every series has the label ucxnet_transport, the Transport's name
// (Transport.Name; a name that two collected transports share gets "#2",
// "#3", ... on the later ones, so that a scrape never fails on a
// duplicate). The other labels follow OpenTelemetry's attribute names,
// with '_' for '.' because a Prometheus label name cannot contain '.':
//
//   - network_io_direction: "transmit" or "receive" (OpenTelemetry's
//     network.io.direction).
//   - network_transport: what carries a conn's bytes (OpenTelemetry's
//     network.transport): "tcp" (a kernel TCP connection, or UCX's tcp
//     transport), "sm" (UCX's shared-memory transports), "rdma"
//     (InfiniBand/RoCE transports), "ucx" while UCX has not said yet, or
//     the UCX transport's own name for any other.
//   - lane: "ucx" (UCX active messages) or "tcp" (the kernel-TCP lane); see
//     ucxnet's Conn.Lane.
//
// Counters, from Transport.Stats and Transport.LaneStats:
//
//	ucxnet_dials_total, ucxnet_accepts_total, ucxnet_refused_total
//	ucxnet_io_bytes_total{lane="ucx",network_io_direction}     payload bytes (received: handshakes too)
//	ucxnet_io_frames_total{lane="ucx",network_io_direction}    frames (sent: data frames)
//	ucxnet_zero_copy_frames_total, ucxnet_queued_writes_total
//	ucxnet_frames_dropped_total{reason}    malformed, unknown_conn, duplicate, foreign
//	ucxnet_resets_total{network_io_direction}                  RST frames
//	ucxnet_protocol_resets_total, ucxnet_peer_failures_total, ucxnet_auth_failures_total
//	ucxnet_stalled_peers_total, ucxnet_idle_peers_closed_total, ucxnet_connects_dropped_total
//	ucxnet_keepalive_pings_total, ucxnet_keepalive_failures_total, ucxnet_keepalive_kernel_total
//	ucxnet_peers_exited_total
//	ucxnet_tcp_lane_rejected_total{reason}  garbage, oversized, timeout, over_cap
//
// The byte and frame counters count the UCX lane: bytes on the kernel-TCP
// lane are the kernel's, and each conn's are in its ConnStats.
//
// Gauges, from Transport.Snapshot:
//
//	ucxnet_lane_conns{lane}                      conns on each lane (always both lanes)
//	ucxnet_conns{lane,network_transport,state}   conns by lane, carrier and ConnStats.State (combinations with conns only)
//	ucxnet_conns_unlisted                        conns beyond ucxnet.MaxSnapshotConns, not in ucxnet_conns
//	ucxnet_conn_unread_bytes{lane}               received, not yet read, summed over conns
//	ucxnet_conn_queued_bytes{lane}               written, not yet handed to UCX, summed over conns
//	ucxnet_peers, ucxnet_inflight_sends, ucxnet_listeners
//
// There are no per-conn series: conn ids come and go without bound, and
// each would make new series in Prometheus's storage. The conns are
// counted by lane, carrier and state instead; `ucxnet ls` and
// Transport.Conns show each one.
package ucxprom
