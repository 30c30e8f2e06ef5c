package ucxprom

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// Label names (OpenTelemetry's attribute names with '_' for '.').
const (
	labelTransport = "ucxnet_transport"
	labelDirection = "network_io_direction"
	labelNetwork   = "network_transport"
	labelLane      = "lane"
	labelState     = "state"
	labelReason    = "reason"
)

// Collector is a prometheus.Collector over ucxnet transports. It reads
// their statistics at each scrape; it holds no state of its own.
type Collector struct {
	snapshots func() []ucxnet.Snapshot
}

// NewCollector returns a Collector over the given transports, or, with
// none, over every open Transport of the process at each scrape
// (ucxnet.Snapshots), the default transport and those made later
// included.
func NewCollector(transports ...*ucxnet.Transport) *Collector {
	if len(transports) == 0 {
		return &Collector{snapshots: ucxnet.Snapshots}
	}
	ts := append([]*ucxnet.Transport(nil), transports...)
	return &Collector{snapshots: func() []ucxnet.Snapshot {
		out := make([]ucxnet.Snapshot, 0, len(ts))
		for _, t := range ts {
			out = append(out, t.Snapshot())
		}
		return out
	}}
}

// metric describes one metric: its name, help, type, the labels it has
// beyond ucxnet_transport, and the samples a snapshot gives it.
type metric struct {
	desc   *prometheus.Desc
	kind   prometheus.ValueType
	values func(s *ucxnet.Snapshot, emit func(v float64, labels ...string))
}

func newMetric(name, help string, kind prometheus.ValueType, labels []string, values func(*ucxnet.Snapshot, func(float64, ...string))) metric {
	return metric{
		desc:   prometheus.NewDesc("ucxnet_"+name, help, append([]string{labelTransport}, labels...), nil),
		kind:   kind,
		values: values,
	}
}

// counter is a metric with one sample per transport.
func counter(name, help string, get func(*ucxnet.Snapshot) uint64) metric {
	return newMetric(name, help, prometheus.CounterValue, nil, func(s *ucxnet.Snapshot, emit func(float64, ...string)) {
		emit(float64(get(s)))
	})
}

// gauge is a gauge with one sample per transport.
func gauge(name, help string, get func(*ucxnet.Snapshot) uint64) metric {
	m := counter(name, help, get)
	m.kind = prometheus.GaugeValue
	return m
}

// split is a counter with one sample per value of label; onUCXLane adds
// the label lane="ucx".
func split(name, help, label string, onUCXLane bool, values map[string]func(*ucxnet.Stats, *ucxnet.LaneStats) uint64) metric {
	labels := []string{label}
	if onUCXLane {
		labels = []string{labelLane, label}
	}
	return newMetric(name, help, prometheus.CounterValue, labels, func(s *ucxnet.Snapshot, emit func(float64, ...string)) {
		for v, get := range values {
			if onUCXLane {
				emit(float64(get(&s.Stats, &s.Lane)), ucxnet.LaneUCX, v)
			} else {
				emit(float64(get(&s.Stats, &s.Lane)), v)
			}
		}
	})
}

// byDirection gives network_io_direction's values "transmit" and
// "receive" the counters sent and received.
func byDirection(sent, received func(*ucxnet.Stats) uint64) map[string]func(*ucxnet.Stats, *ucxnet.LaneStats) uint64 {
	return map[string]func(*ucxnet.Stats, *ucxnet.LaneStats) uint64{
		"transmit": func(s *ucxnet.Stats, _ *ucxnet.LaneStats) uint64 { return sent(s) },
		"receive":  func(s *ucxnet.Stats, _ *ucxnet.LaneStats) uint64 { return received(s) },
	}
}

// metrics are every metric the Collector exports.
var metrics = []metric{
	counter("dials_total", "Dials started.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.Dials }),
	counter("accepts_total", "Conns accepted into a listener's queue.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.Accepts }),
	counter("refused_total", "CONNECTs refused: no listener, backlog full, failed authentication.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.Refused }),
	split("io_bytes_total", "Payload bytes of the data frames sent and of all frames received (handshakes included) on the UCX lane.", labelDirection, true, byDirection(
		func(s *ucxnet.Stats) uint64 { return s.BytesOut },
		func(s *ucxnet.Stats) uint64 { return s.BytesIn })),
	split("io_frames_total", "Data frames sent and all frames received on the UCX lane.", labelDirection, true, byDirection(
		func(s *ucxnet.Stats) uint64 { return s.FramesOut },
		func(s *ucxnet.Stats) uint64 { return s.FramesIn })),
	counter("zero_copy_frames_total", "Data frames sent straight from the writer's memory.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.ZeroCopyFrames }),
	counter("queued_writes_total", "Small writes coalesced into a conn's open frame.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.QueuedWrites }),
	split("frames_dropped_total", "Frames dropped, by reason.", labelReason, false, map[string]func(*ucxnet.Stats, *ucxnet.LaneStats) uint64{
		"malformed":    func(s *ucxnet.Stats, _ *ucxnet.LaneStats) uint64 { return s.BadFrames },
		"unknown_conn": func(s *ucxnet.Stats, _ *ucxnet.LaneStats) uint64 { return s.UnknownConn },
		"duplicate":    func(s *ucxnet.Stats, _ *ucxnet.LaneStats) uint64 { return s.Duplicates },
		"foreign":      func(s *ucxnet.Stats, _ *ucxnet.LaneStats) uint64 { return s.ForeignFrames },
	}),
	split("resets_total", "RST frames sent and received.", labelDirection, false, byDirection(
		func(s *ucxnet.Stats) uint64 { return s.ResetsSent },
		func(s *ucxnet.Stats) uint64 { return s.ResetsReceived })),
	counter("protocol_resets_total", "Conns reset because the peer broke the protocol.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.ProtocolResets }),
	counter("peer_failures_total", "Endpoints UCX reported as failed.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.PeerFailures }),
	counter("auth_failures_total", "Handshakes refused for a wrong or missing pre-shared key.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.AuthFailures }),
	counter("stalled_peers_total", "Endpoints force-closed because the peer stopped draining a zero-copy send.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.StalledPeers }),
	counter("idle_peers_closed_total", "Endpoints closed because no conn used them.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.IdlePeersClosed }),
	counter("peers_flooded_total", "Peers failed for flooding frames that carry no stream data.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.PeersFlooded }),
	counter("connects_dropped_total", "CONNECTs dropped unanswered, over the budget for endpoints made from CONNECTs.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.ConnectsDropped }),
	counter("keepalive_pings_total", "Keepalive probes sent.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.PingsSent }),
	counter("keepalive_kernel_total", "Times a peer silent past the keepalive was kept because the kernel channel says its process lives on this host.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.KeepAliveKernel }),
	counter("peers_exited_total", "Peers failed because the kernel channel said their process exited.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.PeersExited }),
	counter("keepalive_failures_total", "Peers taken for dead because they stayed silent past the keepalive.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.KeepAliveFailures }),
	split("tcp_lane_rejected_total", "Kernel-TCP lane conns closed before their preamble was done, by reason.", labelReason, false, map[string]func(*ucxnet.Stats, *ucxnet.LaneStats) uint64{
		"garbage":   func(_ *ucxnet.Stats, l *ucxnet.LaneStats) uint64 { return l.Garbage },
		"oversized": func(_ *ucxnet.Stats, l *ucxnet.LaneStats) uint64 { return l.Oversized },
		"timeout":   func(_ *ucxnet.Stats, l *ucxnet.LaneStats) uint64 { return l.Timeouts },
		"over_cap":  func(_ *ucxnet.Stats, l *ucxnet.LaneStats) uint64 { return l.OverCap },
	}),
	newMetric("lane_conns", "Conns on each lane now, every state included.", prometheus.GaugeValue, []string{labelLane},
		func(s *ucxnet.Snapshot, emit func(float64, ...string)) {
			emit(float64(s.Stats.OpenConns), ucxnet.LaneUCX)
			emit(float64(s.Lane.OpenConns), ucxnet.LaneTCP)
		}),
	gauge("peers", "UCX endpoints now.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.Peers }),
	gauge("inflight_sends", "Sends whose buffers UCX still owns.", func(s *ucxnet.Snapshot) uint64 { return s.Stats.InflightSends }),
	gauge("listeners", "Names the transport listens on.", func(s *ucxnet.Snapshot) uint64 { return uint64(len(s.Listeners)) }),
	gauge("conns_unlisted", "Conns beyond ucxnet.MaxSnapshotConns, not counted in ucxnet_conns.", func(s *ucxnet.Snapshot) uint64 { return uint64(s.ConnsOmitted) }),
	newMetric("conns", "Conns now, by lane, carrier (network_transport) and state.", prometheus.GaugeValue, []string{labelLane, labelNetwork, labelState},
		func(s *ucxnet.Snapshot, emit func(float64, ...string)) {
			type key struct{ lane, network, state string }
			n := map[key]int{}
			for i := range s.Conns {
				c := &s.Conns[i]
				n[key{c.Lane, NetworkTransport(c), c.State}]++
			}
			for k, v := range n {
				emit(float64(v), k.lane, k.network, k.state)
			}
		}),
	newMetric("conn_unread_bytes", "Bytes received and not yet read, summed over the conns (UCX lane; the kernel keeps the TCP lane's).", prometheus.GaugeValue, []string{labelLane},
		func(s *ucxnet.Snapshot, emit func(float64, ...string)) {
			emit(float64(sumConns(s, func(c *ucxnet.ConnStats) uint64 { return c.Unread })), ucxnet.LaneUCX)
		}),
	newMetric("conn_queued_bytes", "Bytes written and not yet handed to UCX, summed over the conns (UCX lane).", prometheus.GaugeValue, []string{labelLane},
		func(s *ucxnet.Snapshot, emit func(float64, ...string)) {
			emit(float64(sumConns(s, func(c *ucxnet.ConnStats) uint64 { return c.Queued })), ucxnet.LaneUCX)
		}),
}

// sumConns sums get over the snapshot's UCX-lane conns.
func sumConns(s *ucxnet.Snapshot, get func(*ucxnet.ConnStats) uint64) uint64 {
	var n uint64
	for i := range s.Conns {
		if s.Conns[i].Lane == ucxnet.LaneUCX {
			n += get(&s.Conns[i])
		}
	}
	return n
}

// NetworkTransport names what carries a conn's bytes, as the
// network_transport label does: "tcp" for the kernel-TCP lane and UCX's
// tcp transport, "sm" for UCX's shared-memory transports, "rdma" for its
// InfiniBand/RoCE transports, "ucx" when UCX has not said yet, else the
// first UCX transport's name.
func NetworkTransport(c *ucxnet.ConnStats) string {
	if c.Lane == ucxnet.LaneTCP {
		return "tcp"
	}
	if len(c.Transports) == 0 {
		return "ucx"
	}
	name, _, _ := strings.Cut(c.Transports[0], "/")
	switch {
	case name == "tcp":
		return "tcp"
	case name == "posix" || name == "sysv" || name == "xpmem" || name == "cma" || name == "knem":
		return "sm"
	case strings.HasPrefix(name, "rc") || strings.HasPrefix(name, "ud") || strings.HasPrefix(name, "dc") || name == "ib":
		return "rdma"
	}
	return name
}

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range metrics {
		ch <- m.desc
	}
}

// Collect sends the transports' metrics as they are now.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]int{}
	for _, s := range c.snapshots() {
		name := s.Transport
		if seen[name]++; seen[name] > 1 {
			name = fmt.Sprintf("%s#%d", name, seen[name])
		}
		for _, m := range metrics {
			m.values(&s, func(v float64, labels ...string) {
				ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v, append([]string{name}, labels...)...)
			})
		}
	}
}
