package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// benchReport is the result of a run (the --json output).
type benchReport struct {
	UCXVersion string          `json:"ucx_version"`
	UCXTLS     string          `json:"ucx_tls"` // "" when unset
	Duration   string          `json:"duration"`
	Transports []string        `json:"transports"`
	Sizes      []int           `json:"sizes"`
	Server     string          `json:"server,omitempty"`   // --remote: the bench server's name
	UCXVia     []string        `json:"ucx_via,omitempty"`  // UCX transports carrying the ucx conns
	UCXLane    string          `json:"ucx_lane,omitempty"` // the ucx conns' lane and why
	Rows       []*benchRow     `json:"rows"`
	CPU        map[string]*cpu `json:"cpu"` // streaming phase, per transport
	Perftest   *perftestReport `json:"perftest,omitempty"`
}

// benchRow is one measured quantity, with a value per transport.
type benchRow struct {
	Key    string             `json:"key"`
	Label  string             `json:"label"`
	Unit   string             `json:"unit"`
	Better string             `json:"better"` // "lower" or "higher"
	Values map[string]float64 `json:"values"`
}

// cpu is the CPU time of both processes over a streaming phase.
type cpu struct {
	ClientSec float64 `json:"client_s"`
	ServerSec float64 `json:"server_s"`
	Bytes     int64   `json:"bytes"`
}

func (r *benchReport) row(key, label, unit, better string) *benchRow {
	for _, x := range r.Rows {
		if x.Key == key {
			return x
		}
	}
	x := &benchRow{Key: key, Label: label, Unit: unit, Better: better, Values: map[string]float64{}}
	r.Rows = append(r.Rows, x)
	return x
}

// benchRows creates the rows in table order, so that they print in it.
func (r *benchReport) benchRows(sizes []int, workloads map[string]bool) {
	if workloads["rtt"] {
		r.row("rtt_p50_us", "64 B round trip p50", "µs", "lower")
		r.row("rtt_p99_us", "64 B round trip p99", "µs", "lower")
		r.row(pingConnsKey(benchPingConns), fmt.Sprintf("64 B ping-pong, %d conns", benchPingConns), "rt/s", "higher")
	}
	if workloads["idle"] {
		r.idleRows()
	}
	if workloads["stream"] {
		for _, s := range sizes {
			r.row(streamKey(s, 1), fmt.Sprintf("stream %s writes, 1 conn", fmtSize(s)), "MB/s", "higher")
			r.row(streamKey(s, benchStreamConns), fmt.Sprintf("stream %s writes, %d conns", fmtSize(s), benchStreamConns), "MB/s", "higher")
		}
	}
	if workloads["http"] {
		r.row(httpKey(1), "HTTP/1.1 req/s, 1 client", "req/s", "higher")
		r.row(httpKey(benchHTTPHigh), fmt.Sprintf("HTTP/1.1 req/s, %d clients", benchHTTPHigh), "req/s", "higher")
	}
	if workloads["stream"] {
		r.row("cpu_s_per_gb", "CPU s per GB streamed", "s/GB", "lower")
	}
}

func streamKey(size, conns int) string {
	return fmt.Sprintf("stream_%s_%dconn_mbps", fmtSize(size), conns)
}

func pingConnsKey(conns int) string { return fmt.Sprintf("pingpong_%dconn_rtps", conns) }

func httpKey(clients int) string { return fmt.Sprintf("http_%dclient_rps", clients) }

// progressLine shows bench's progress on stderr: on a terminal it rewrites
// one status line; elsewhere (a pipe, a file, a CI log) it writes one line
// per step.
type progressLine struct {
	w    io.Writer
	tty  bool
	last int
}

func newProgressLine(w io.Writer) *progressLine {
	return &progressLine{w: w, tty: isTerminal(w)}
}

func (p *progressLine) set(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if !p.tty {
		fmt.Fprintf(p.w, "bench: %s\n", s)
		return
	}
	pad := ""
	if n := p.last - len(s); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\rbench: %s%s", s, pad)
	p.last = len(s)
}

func (p *progressLine) clear() {
	if p.last > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.last+len("bench: ")))
		p.last = 0
	}
}

// printBench prints the report as a table.
func printBench(w io.Writer, r *benchReport, el time.Duration) {
	tls := r.UCXTLS
	if tls == "" {
		tls = "(unset: UCX picks)"
	}
	where := "client and server in separate processes"
	if r.Server != "" {
		where = "server " + r.Server + " (bench --serve)"
	}
	fmt.Fprintf(w, "ucxnet bench: UCX %s, UCX_TLS=%s, %v per measurement, %s\n", r.UCXVersion, tls, r.Duration, where)
	if len(r.UCXVia) > 0 {
		fmt.Fprintf(w, "ucx conns carried by %s (lane %s)\n", fmtTransports(r.UCXVia), r.UCXLane)
	}
	fmt.Fprintln(w)

	table, compared := r.table()
	printTable(w, table)
	if compared {
		fmt.Fprintf(w, "(ucx vs X: >1x means ucx is better: for latency and CPU it is X/ucx, i.e. \"x faster\" / \"x less CPU\"; for rates ucx/X)\n")
	}
	fmt.Fprintf(w, "(MB/s = 10^6 bytes/s; rt/s = round trips/s of all conns together; streams are acknowledged by the server, so they time delivery; CPU is user+sys of both processes)\n")
	for _, t := range r.Transports {
		if c := r.CPU[t]; c != nil {
			fmt.Fprintf(w, "  %-5s streamed %.2f GB: client %.2f s CPU, server %.2f s CPU\n", t, float64(c.Bytes)/1e9, c.ClientSec, c.ServerSec)
		}
	}
	if r.Perftest != nil {
		fmt.Fprintln(w)
		printPerftest(w, r)
	}
	fmt.Fprintf(w, "\nbench finished in %v\n", el.Round(100*time.Millisecond))
}

// table lays the rows out as cells, a header line first: a column per
// transport and, when ucx was measured, one comparing ucx with each other
// transport (compared reports whether there is such a column).
func (r *benchReport) table() (table [][]string, compared bool) {
	var others []string
	hasUCX := false
	for _, t := range r.Transports {
		if t == "ucx" {
			hasUCX = true
		} else {
			others = append(others, t)
		}
	}
	if !hasUCX {
		others = nil
	}
	header := append([]string{""}, r.Transports...)
	for _, o := range others {
		header = append(header, "ucx vs "+o)
	}
	table = [][]string{header}
	for _, row := range r.Rows {
		line := []string{row.Label}
		for _, t := range r.Transports {
			line = append(line, fmtValue(row.Values[t], row.Unit))
		}
		for _, o := range others {
			u, v := row.Values["ucx"], row.Values[o]
			if row.Better == "lower" {
				u, v = v, u
			}
			line = append(line, ratio(u, v))
		}
		table = append(table, line)
	}
	return table, len(others) > 0
}

// printTable prints the cells in aligned columns: the first left-aligned,
// the others right-aligned.
func printTable(w io.Writer, table [][]string) {
	var widths []int
	for _, l := range table {
		for i, c := range l {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, l := range table {
		var sb strings.Builder
		for i, c := range l {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				sb.WriteString(c + pad)
			} else {
				sb.WriteString("   " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(sb.String(), " "))
	}
}

func fmtValue(v float64, unit string) string {
	if v == 0 {
		return "-"
	}
	switch unit {
	case "µs":
		return fmt.Sprintf("%.1f µs", v)
	case "MB/s":
		return fmt.Sprintf("%.0f MB/s", v)
	case "rt/s":
		return fmt.Sprintf("%.0f rt/s", v)
	case "req/s":
		return fmt.Sprintf("%.0f req/s", v)
	case "s/GB":
		return fmt.Sprintf("%.2f s/GB", v)
	}
	return fmt.Sprintf("%.3g %s", v, unit)
}
