package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBench runs a short bench over ucx and tcp and checks that the JSON
// report has every row with a positive value per transport. It asserts
// nothing about which transport is faster: timings on a shared machine
// are noise.
func TestBench(t *testing.T) {
	reg := t.TempDir()
	r := runBin(t, reg, nil, 50*time.Second, "bench", "--duration", "100ms", "--sizes", "64k", "--transports", "ucx,tcp", "--json")
	if r.code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	rep := checkBenchReport(t, r.stdout)
	if rep.Server != "" {
		t.Errorf("server %q, want none (a child process)", rep.Server)
	}
	if rep.Perftest != nil && rep.Perftest.Error != "" {
		t.Logf("ucx_perftest: %s", rep.Perftest.Error)
	}
	// stderr is a pipe here, not a terminal: one line per step, no
	// carriage returns rewriting a status line.
	if strings.Contains(r.stderr, "\r") || !strings.Contains(r.stderr, "bench: starting the server process\n") ||
		strings.Count(r.stderr, "\nbench: ") < 3 {
		t.Errorf("want one progress line per step on stderr (not a terminal), got %q", r.stderr)
	}
}

// TestBenchRemote runs "bench --serve" and "bench --remote" against it
// through one registry, as on two hosts: the report has every row for ucx
// and Go TCP, names the server and its lane, and counts the server's CPU;
// the server serves a second client, then ends at SIGINT with status 0.
func TestBenchRemote(t *testing.T) {
	reg := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := binCommand(ctx, t, reg, "bench", "--serve", "rb", "--tcp-host", "127.0.0.1")
	_, srvErr := startReady(t, srv, "ready ")
	for i := range 2 {
		r := runBin(t, reg, nil, 50*time.Second, "bench", "--remote", "rb", "--duration", "100ms", "--sizes", "64k", "--json")
		if r.code != 0 {
			t.Fatalf("bench --remote (run %d): exit %d\nstdout:\n%s\nstderr:\n%s\nserver's stderr:\n%s", i, r.code, r.stdout, r.stderr, srvErr.String())
		}
		rep := checkBenchReport(t, r.stdout)
		if rep.Server != "rb" || rep.Perftest != nil {
			t.Errorf("server %q, perftest %+v; want rb and no ucx_perftest run", rep.Server, rep.Perftest)
		}
		if !strings.HasPrefix(rep.UCXLane, "ucx: ") && !strings.HasPrefix(rep.UCXLane, "tcp: ") {
			t.Errorf("ucx_lane %q, want the lane and its reason", rep.UCXLane)
		}
	}
	if err := srv.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("bench --serve after SIGINT: %v\nstderr:\n%s", err, srvErr.String())
	}
}

// TestBenchRemoteErrors: flags that cannot go together are usage errors,
// and a server nobody runs is refused at once.
func TestBenchRemoteErrors(t *testing.T) {
	reg := t.TempDir()
	for _, args := range [][]string{
		{"--serve", "a", "--remote", "b"},
		{"--remote", "b", "--transports", "ucx,unix"},
		{"--serve", "a", "--transports", "unix"},
		{"--tcp-host", "127.0.0.1"},
	} {
		r := runBin(t, reg, nil, 20*time.Second, append([]string{"bench"}, args...)...)
		if r.code != 2 {
			t.Errorf("bench %v: exit %d, want 2 (usage)\nstderr:\n%s", args, r.code, r.stderr)
		}
	}
	r := runBin(t, reg, nil, 20*time.Second, "bench", "--remote", "nobody-serves-this")
	if r.code != 1 || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("bench --remote to nobody: exit %d, want 1 and connection refused\nstderr:\n%s", r.code, r.stderr)
	}
}

// TestParseBenchAddrs: a server's address list is checked before use.
func TestParseBenchAddrs(t *testing.T) {
	good := `{"ucx":{"echo":"x-echo","sink":"x-sink","http":"x-http"},"tcp":{"echo":"10.0.0.1:1","sink":"10.0.0.1:2","http":"[::1]:3"}}`
	m, err := parseBenchAddrs(good, []string{"ucx", "tcp"})
	if err != nil || m["tcp"]["http"] != "[::1]:3" || m["ucx"]["sink"] != "x-sink" {
		t.Fatalf("good list: %v, %v", m, err)
	}
	for _, bad := range []string{
		``, `null`, `[]`, `{"ucx":1}`,
		`{"ucx":{"echo":"x-echo","sink":"x-sink","http":"x-http"}}`, // no tcp
		`{"ucx":{"echo":"x-echo","sink":"x-sink"},"tcp":{"echo":"a:1","sink":"a:2","http":"a:3"}}`,
		`{"ucx":{"echo":"x-echo","sink":"x-sink","http":"../x"},"tcp":{"echo":"a:1","sink":"a:2","http":"a:3"}}`,
		`{"ucx":{"echo":"x-echo","sink":"x-sink","http":"x-http"},"tcp":{"echo":"a:1","sink":"a","http":"a:3"}}`,
	} {
		if _, err := parseBenchAddrs(bad, []string{"ucx", "tcp"}); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if _, err := parseBenchAddrs(`{"unix":{"echo":"/s","sink":"/s","http":"/s"}}`, []string{"unix"}); err == nil {
		t.Error("unix addresses accepted from a remote server")
	}
	for _, bad := range []string{"", "1", "a b", "-1 2", "1 -2", "99999999999999999999 1"} {
		if _, _, err := parseRusage(bad); err == nil {
			t.Errorf("rusage %q: accepted", bad)
		}
	}
	if u, s, err := parseRusage("1500 2"); err != nil || u != 1500*time.Microsecond || s != 2*time.Microsecond {
		t.Errorf("rusage 1500 2: %v %v %v", u, s, err)
	}
}

// benchReportJSON is the part of bench's --json report the tests check.
type benchReportJSON struct {
	Server     string   `json:"server"`
	UCXLane    string   `json:"ucx_lane"`
	Transports []string `json:"transports"`
	Sizes      []int    `json:"sizes"`
	Rows       []struct {
		Key    string             `json:"key"`
		Label  string             `json:"label"`
		Unit   string             `json:"unit"`
		Better string             `json:"better"`
		Values map[string]float64 `json:"values"`
	} `json:"rows"`
	CPU map[string]struct {
		ClientSec float64 `json:"client_s"`
		ServerSec float64 `json:"server_s"`
		Bytes     int64   `json:"bytes"`
	} `json:"cpu"`
	Perftest *struct {
		Error string `json:"error"`
	} `json:"perftest"`
}

// checkBenchReport checks that a report of a run over ucx and tcp with
// --sizes 64k has every row with a positive value per transport, and CPU
// time of both processes. It asserts nothing about which transport is
// faster: timings on a shared machine are noise.
func checkBenchReport(t *testing.T, out string) benchReportJSON {
	t.Helper()
	var rep benchReportJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench --json output is not JSON: %v\n%s", err, out)
	}
	if fmt.Sprint(rep.Transports) != "[ucx tcp]" || fmt.Sprint(rep.Sizes) != "[65536]" {
		t.Errorf("transports %v, sizes %v; want [ucx tcp], [65536]", rep.Transports, rep.Sizes)
	}
	want := []string{
		"rtt_p50_us", "rtt_p99_us", "pingpong_16conn_rtps",
		"idle_100us_p50_us", "idle_100us_p99_us", "idle_1ms_p50_us", "idle_1ms_p99_us",
		"idle_10ms_p50_us", "idle_10ms_p99_us",
		"stream_64KiB_1conn_mbps", "stream_64KiB_16conn_mbps",
		"http_1client_rps", "http_32client_rps",
		"cpu_s_per_gb",
	}
	rows := map[string]int{}
	for i, row := range rep.Rows {
		rows[row.Key] = i
		if row.Label == "" || row.Unit == "" || (row.Better != "lower" && row.Better != "higher") {
			t.Errorf("row %q: label %q, unit %q, better %q", row.Key, row.Label, row.Unit, row.Better)
		}
	}
	for _, k := range want {
		i, ok := rows[k]
		if !ok {
			t.Errorf("no row %q in the report", k)
			continue
		}
		for _, tr := range []string{"ucx", "tcp"} {
			if v := rep.Rows[i].Values[tr]; !(v > 0) {
				t.Errorf("row %q, %s: %v, want a positive number", k, tr, v)
			}
		}
	}
	if len(rep.Rows) != len(want) {
		t.Errorf("report has %d rows, want %d: %+v", len(rep.Rows), len(want), rep.Rows)
	}
	for _, tr := range []string{"ucx", "tcp"} {
		c := rep.CPU[tr]
		if c.Bytes <= 0 || c.ClientSec <= 0 || c.ServerSec <= 0 {
			t.Errorf("cpu[%s] = %+v, want positive bytes and CPU times of both processes", tr, c)
		}
	}
	return rep
}

// --workloads picks the rows; an unknown workload is a usage error.
func TestBenchWorkloads(t *testing.T) {
	got, err := parseWorkloads(" idle, RTT,,idle")
	if err != nil || len(got) != 2 || !got["idle"] || !got["rtt"] {
		t.Errorf("parseWorkloads: %v, %v; want idle and rtt", got, err)
	}
	for _, bad := range []string{"", ",", "idle,bogus"} {
		if _, err := parseWorkloads(bad); err == nil {
			t.Errorf("parseWorkloads(%q) accepted", bad)
		}
	}
	r := runBin(t, t.TempDir(), nil, 10*time.Second, "bench", "--workloads", "bogus")
	if r.code != 2 || !strings.Contains(r.stderr, "unknown workload") {
		t.Errorf("bench --workloads bogus: exit %d, stderr %q; want a usage error", r.code, r.stderr)
	}
	rep := &benchReport{}
	rep.benchRows([]int{4096}, map[string]bool{"idle": true})
	if len(rep.Rows) != 2*len(benchIdleGaps) {
		t.Errorf("idle alone: %d rows, want %d", len(rep.Rows), 2*len(benchIdleGaps))
	}
}

// TestBenchIdleChild drives bench-idle, the client process of the requests
// after idle, by hand against a bench server's Go TCP echo: it answers a
// run with one round trip per request, answers a malformed command with an
// error line and goes on, and exits with status 0 at EOF on stdin.
func TestBenchIdleChild(t *testing.T) {
	reg := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := binCommand(ctx, t, reg, "bench-server", "--transports", "tcp")
	srvIn, err := srv.StdinPipe() // open until the test ends: EOF ends the server
	if err != nil {
		t.Fatal(err)
	}
	defer srvIn.Close()
	line, _ := startReady(t, srv, "ready ")
	var addrs map[string]map[string]string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "ready ")), &addrs); err != nil || addrs["tcp"][svcEcho] == "" {
		t.Fatalf("bench-server's ready line %q: %v", line, err)
	}
	cmds := "run 1ms 3\nbogus\nrun 1ms 0\nrun -1s 2\nrun 1ms 3 4\nrun 100us 2\n"
	r := runBin(t, reg, strings.NewReader(cmds), 30*time.Second, "bench-idle", "--transport", "tcp", addrs["tcp"][svcEcho])
	if r.code != 0 {
		t.Fatalf("bench-idle: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := []string{"ready ", "lat ", "error ", "error ", "error ", "error ", "lat "}
	if len(lines) != len(want) {
		t.Fatalf("bench-idle said %q, want lines starting %q", lines, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want %q...", i, lines[i], w)
		}
	}
	for i, n := range map[int]int{1: 3, 6: 2} {
		lat, err := parseLatencies(strings.TrimPrefix(lines[i], "lat "), n)
		if err != nil {
			t.Errorf("line %d %q: %v", i, lines[i], err)
		}
		for _, l := range lat {
			if l <= 0 {
				t.Errorf("line %d: round trip %v, want > 0", i, l)
			}
		}
	}
}

// TestBenchIdleOnly runs the requests after idle alone over Go TCP and a
// unix socket: each transport gets a server process of its own, the unix
// one its own socket directory, and the report has their rows.
func TestBenchIdleOnly(t *testing.T) {
	reg := t.TempDir()
	r := runBin(t, reg, nil, 50*time.Second, "bench", "--workloads", "idle", "--duration", "20ms", "--transports", "tcp,unix", "--perftest=false", "--json")
	if r.code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var rep benchReportJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json output is not JSON: %v\n%s", err, r.stdout)
	}
	if len(rep.Rows) != 2*len(benchIdleGaps) {
		t.Errorf("%d rows, want %d: %+v", len(rep.Rows), 2*len(benchIdleGaps), rep.Rows)
	}
	for _, row := range rep.Rows {
		for _, tr := range []string{"tcp", "unix"} {
			if v := row.Values[tr]; !(v > 0) {
				t.Errorf("row %q, %s: %v, want a positive number", row.Key, tr, v)
			}
		}
	}
}

// TestParseIdleAnswers: what bench-idle is asked, and what it answers, is
// checked before use.
func TestParseIdleAnswers(t *testing.T) {
	if gap, n, err := parseIdleRun("run 1ms 10"); err != nil || gap != time.Millisecond || n != 10 {
		t.Errorf("parseIdleRun(run 1ms 10) = %v, %d, %v", gap, n, err)
	}
	for _, bad := range []string{"", "run", "run 1ms", "walk 1ms 10", "run x 10", "run 1ms x", "run 1ms 0", "run 1ms 10001", "run -1ms 1", "run 2m 1"} {
		if _, _, err := parseIdleRun(bad); err == nil {
			t.Errorf("parseIdleRun(%q): no error", bad)
		}
	}
	if lat, err := parseLatencies("1000 2000", 2); err != nil || lat[0] != time.Microsecond || lat[1] != 2*time.Microsecond {
		t.Errorf("parseLatencies(1000 2000) = %v, %v", lat, err)
	}
	for _, bad := range []string{"", "1000", "1000 2000 3000", "1000 x", "1000 -5", "1000 99999999999999999999"} {
		if _, err := parseLatencies(bad, 2); err == nil {
			t.Errorf("parseLatencies(%q, 2): no error", bad)
		}
	}
}
