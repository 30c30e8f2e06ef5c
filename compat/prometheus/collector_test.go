package ucxprom_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	ucxprom "github.com/ucxnet/ucxnet/compat/prometheus"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// newTransport returns a transport named name on reg, closed when the test
// ends.
func newTransport(t *testing.T, reg registry.Registry, name, lane string) *ucxnet.Transport {
	t.Helper()
	tr, err := ucxnet.NewTransport(ucxnet.Config{Registry: reg, Name: name, Lane: lane, StatsDir: ucxnet.StatsOff})
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// connect makes a conn from client to a listener on server, sends n bytes
// over it and reads them on the server; both ends stay open until the test
// ends.
func connect(t *testing.T, server, client *ucxnet.Transport, n int) *ucxnet.Conn {
	t.Helper()
	lc := ucxnet.ListenConfig{Transport: server}
	ln, err := lc.Listen(context.Background(), ucxnet.Network, "")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Errorf("Accept: %v", err)
		}
		accepted <- c
	}()
	d := ucxnet.Dialer{Transport: client}
	c, err := d.Dial(ucxnet.Network, ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	s := <-accepted
	if s == nil {
		t.FailNow()
	}
	t.Cleanup(func() { s.Close() })
	go c.Write(make([]byte, n))
	s.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(s, make([]byte, n)); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return c.(*ucxnet.Conn)
}

// scrape serves reg as promhttp does, scrapes it over HTTP and parses the
// text it answers.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return mfs
}

// value returns the value of the sample of family name whose labels
// include want, and whether there is one.
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// wantCarrier is the network_transport a UCX-lane conn between two
// transports of this process has under $UCX_TLS ("" when it is not one
// transport).
func wantCarrier() string {
	switch os.Getenv("UCX_TLS") {
	case "tcp":
		return "tcp"
	case "sm", "posix", "sysv":
		return "sm"
	}
	return ""
}

// TestScrape: a scrape over HTTP of a registry with the Collector shows
// each transport's series with its counts: dials, accepts, bytes and
// frames each way, listeners, and its conns by lane, carrier and state.
func TestScrape(t *testing.T) {
	reg := registry.NewMemory()
	srv, cli := newTransport(t, reg, "prom-server", ucxnet.LaneUCX), newTransport(t, reg, "prom-client", ucxnet.LaneUCX)
	const n = 300_000
	c := connect(t, srv, cli, n)
	lane, _ := c.Lane()
	if lane != ucxnet.LaneUCX {
		t.Skipf("the conn took the %s lane; this test counts the UCX lane's frames", lane)
	}

	pr := prometheus.NewRegistry()
	pr.MustRegister(ucxprom.NewCollector(srv, cli))
	mfs := scrape(t, pr)

	tr := func(name string, kv ...string) map[string]string {
		m := map[string]string{"ucxnet_transport": name}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		min    float64
		max    float64
	}{
		{"ucxnet_dials_total", tr("prom-client"), 1, 1},
		{"ucxnet_dials_total", tr("prom-server"), 0, 0},
		{"ucxnet_accepts_total", tr("prom-server"), 1, 1},
		{"ucxnet_listeners", tr("prom-server"), 1, 1},
		{"ucxnet_listeners", tr("prom-client"), 0, 0},
		{"ucxnet_io_bytes_total", tr("prom-client", "lane", "ucx", "network_io_direction", "transmit"), n, n},
		{"ucxnet_io_bytes_total", tr("prom-server", "lane", "ucx", "network_io_direction", "receive"), n, n + 4096}, // and the handshake's
		{"ucxnet_io_frames_total", tr("prom-client", "lane", "ucx", "network_io_direction", "transmit"), 1, n},
		{"ucxnet_peers", tr("prom-client"), 1, 1},
		{"ucxnet_conns", tr("prom-client", "lane", "ucx", "state", "open"), 1, 1},
		{"ucxnet_lane_conns", tr("prom-client", "lane", "ucx"), 1, 1},
		{"ucxnet_lane_conns", tr("prom-client", "lane", "tcp"), 0, 0},
		{"ucxnet_conns", tr("prom-server", "lane", "ucx", "state", "open"), 1, 1},
		{"ucxnet_resets_total", tr("prom-client", "network_io_direction", "receive"), 0, 0},
		{"ucxnet_auth_failures_total", tr("prom-server"), 0, 0},
		{"ucxnet_frames_dropped_total", tr("prom-server", "reason", "malformed"), 0, 0},
		{"ucxnet_tcp_lane_rejected_total", tr("prom-server", "reason", "garbage"), 0, 0},
	} {
		v, ok := value(mfs, tc.name, tc.labels)
		if !ok || v < tc.min || v > tc.max {
			t.Errorf("%s%v = %v (found: %v), want %v..%v", tc.name, tc.labels, v, ok, tc.min, tc.max)
		}
	}
	if want := wantCarrier(); want != "" {
		if v, ok := value(mfs, "ucxnet_conns", tr("prom-client", "network_transport", want)); !ok || v != 1 {
			t.Errorf("ucxnet_conns{network_transport=%q} = %v (found: %v), want 1 under UCX_TLS=%s; conn transports %v",
				want, v, ok, os.Getenv("UCX_TLS"), c.Transports())
		}
	}
	// Every family has a sample for each transport.
	for name, mf := range mfs {
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "ucxnet_transport" {
					seen[l.GetValue()] = true
				}
			}
		}
		if !seen["prom-server"] || !seen["prom-client"] {
			t.Errorf("%s has samples for %v, want both transports", name, seen)
		}
	}
	if problems, err := testutil.CollectAndLint(ucxprom.NewCollector(srv, cli)); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestScrapeTCPLane: a conn on the kernel-TCP lane is counted under
// lane="tcp", network_transport="tcp".
func TestScrapeTCPLane(t *testing.T) {
	reg := registry.NewMemory()
	srv, cli := newTransport(t, reg, "lane-server", ucxnet.LaneTCP), newTransport(t, reg, "lane-client", ucxnet.LaneTCP)
	c := connect(t, srv, cli, 1000)
	if lane, why := c.Lane(); lane != ucxnet.LaneTCP {
		t.Fatalf("the conn took the %s lane (%s), want tcp", lane, why)
	}
	pr := prometheus.NewRegistry()
	pr.MustRegister(ucxprom.NewCollector(srv, cli))
	mfs := scrape(t, pr)
	for _, name := range []string{"lane-server", "lane-client"} {
		want := map[string]string{"ucxnet_transport": name, "lane": "tcp", "network_transport": "tcp", "state": "open"}
		if v, ok := value(mfs, "ucxnet_conns", want); !ok || v != 1 {
			t.Errorf("ucxnet_conns%v = %v (found: %v), want 1", want, v, ok)
		}
	}
	if v, ok := value(mfs, "ucxnet_lane_conns", map[string]string{"ucxnet_transport": "lane-client", "lane": "tcp"}); !ok || v != 1 {
		t.Errorf("ucxnet_lane_conns{lane=tcp} = %v (found: %v), want 1", v, ok)
	}
	if v, _ := value(mfs, "ucxnet_io_bytes_total", map[string]string{"ucxnet_transport": "lane-client", "network_io_direction": "transmit"}); v != 0 {
		t.Errorf("UCX-lane bytes sent = %v on a transport whose one conn is on the TCP lane, want 0", v)
	}
}

// TestCollectorAllTransports: NewCollector() with no transport collects
// every open transport of the process at each scrape, and a name two
// transports share is told apart rather than failing the scrape.
func TestCollectorAllTransports(t *testing.T) {
	reg := registry.NewMemory()
	newTransport(t, reg, "twin", "")
	late := newTransport(t, reg, "twin", "")
	pr := prometheus.NewRegistry()
	pr.MustRegister(ucxprom.NewCollector())
	mfs := scrape(t, pr)
	for _, name := range []string{"twin", "twin#2"} {
		if _, ok := value(mfs, "ucxnet_dials_total", map[string]string{"ucxnet_transport": name}); !ok {
			t.Errorf("no ucxnet_dials_total for transport %q", name)
		}
	}
	late.Close()
	mfs = scrape(t, pr)
	if _, ok := value(mfs, "ucxnet_dials_total", map[string]string{"ucxnet_transport": "twin#2"}); ok {
		t.Errorf("a closed transport is still collected")
	}
	if _, ok := value(mfs, "ucxnet_dials_total", map[string]string{"ucxnet_transport": "twin"}); !ok {
		t.Errorf("the open transport is no longer collected")
	}
}

// statSeries names the series that exports each field of ucxnet.Stats and
// ucxnet.LaneStats.
var statSeries = map[string]string{
	"Dials": "ucxnet_dials_total", "Accepts": "ucxnet_accepts_total", "Refused": "ucxnet_refused_total",
	"FramesIn": "ucxnet_io_frames_total", "FramesOut": "ucxnet_io_frames_total",
	"BytesIn": "ucxnet_io_bytes_total", "BytesOut": "ucxnet_io_bytes_total",
	"BadFrames": "ucxnet_frames_dropped_total", "UnknownConn": "ucxnet_frames_dropped_total",
	"Duplicates": "ucxnet_frames_dropped_total", "ForeignFrames": "ucxnet_frames_dropped_total",
	"ResetsSent": "ucxnet_resets_total", "ResetsReceived": "ucxnet_resets_total",
	"ProtocolResets": "ucxnet_protocol_resets_total", "PeerFailures": "ucxnet_peer_failures_total",
	"AuthFailures": "ucxnet_auth_failures_total", "OpenConns": "ucxnet_lane_conns", "Peers": "ucxnet_peers",
	"InflightSends": "ucxnet_inflight_sends", "ZeroCopyFrames": "ucxnet_zero_copy_frames_total",
	"StalledPeers": "ucxnet_stalled_peers_total", "PingsSent": "ucxnet_keepalive_pings_total",
	"KeepAliveFailures": "ucxnet_keepalive_failures_total", "KeepAliveKernel": "ucxnet_keepalive_kernel_total", "PeersExited": "ucxnet_peers_exited_total",
	"IdlePeersClosed": "ucxnet_idle_peers_closed_total", "QueuedWrites": "ucxnet_queued_writes_total",
	"ConnectsDropped": "ucxnet_connects_dropped_total", "PeersFlooded": "ucxnet_peers_flooded_total",
	// LaneStats
	"Garbage": "ucxnet_tcp_lane_rejected_total", "Oversized": "ucxnet_tcp_lane_rejected_total",
	"Timeouts": "ucxnet_tcp_lane_rejected_total", "OverCap": "ucxnet_tcp_lane_rejected_total",
}

// TestEveryStatExported: every counter of ucxnet.Stats and
// ucxnet.LaneStats has a series, so a counter added to the core module
// fails here until the Collector exports it.
func TestEveryStatExported(t *testing.T) {
	pr := prometheus.NewRegistry()
	pr.MustRegister(ucxprom.NewCollector(newTransport(t, registry.NewMemory(), "fields", "")))
	mfs, err := pr.Gather()
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for _, mf := range mfs {
		described[mf.GetName()] = true
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[ucxnet.Stats](), reflect.TypeFor[ucxnet.LaneStats]()} {
		for f := range typ.Fields() {
			name, ok := statSeries[f.Name]
			if !ok {
				t.Errorf("%s.%s has no series in the Collector", typ.Name(), f.Name)
			} else if !described[name] {
				t.Errorf("%s.%s: the Collector exports no %s", typ.Name(), f.Name, name)
			}
		}
	}
}
