package main

import (
	"encoding/json"
	"fmt"
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
	var rep struct {
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
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json output is not JSON: %v\n%s", err, r.stdout)
	}
	if fmt.Sprint(rep.Transports) != "[ucx tcp]" || fmt.Sprint(rep.Sizes) != "[65536]" {
		t.Errorf("transports %v, sizes %v; want [ucx tcp], [65536]", rep.Transports, rep.Sizes)
	}
	want := []string{
		"rtt_p50_us", "rtt_p99_us", "pingpong_16conn_rtps",
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
	if rep.Perftest != nil && rep.Perftest.Error != "" {
		t.Logf("ucx_perftest: %s", rep.Perftest.Error)
	}
	if !strings.Contains(r.stderr, "\rbench: ") {
		t.Errorf("no progress line on stderr: %q", r.stderr)
	}
}
