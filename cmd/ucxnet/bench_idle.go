package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

// The "request after idle" rows: one conn per transport sends a 64 B
// request and waits for the echo, after sleeping gap before each request,
// so that both processes' progress engines (and the vCPUs) have gone
// idle, as with requests spaced in time. Transports take turns in rounds
// of benchIdleRound requests, so that they share the machine's state.

// benchIdleGaps are the idle times measured.
var benchIdleGaps = []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond}

// benchIdleRound is the number of requests a transport sends per turn.
const benchIdleRound = 10

// benchIdleMin is the fewest requests per transport and gap.
const benchIdleMin = 50

func idleKey(gap time.Duration, p int) string {
	return fmt.Sprintf("idle_%s_p%d_us", fmtGap(gap), p)
}

// fmtGap formats a gap as "100us", "1ms" or "10ms".
func fmtGap(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%dus", d/time.Microsecond)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// idleRows creates the request-after-idle rows.
func (r *benchReport) idleRows() {
	for _, gap := range benchIdleGaps {
		for _, p := range []int{50, 99} {
			r.row(idleKey(gap, p), fmt.Sprintf("64 B request after %v idle p%d", gap, p), "µs", "lower")
		}
	}
}

// runIdle measures the request-after-idle rows over every transport of
// bs, taking turns. Each gap gets about d/2 of requests per transport
// (at least benchIdleMin).
func runIdle(ctx context.Context, rep *benchReport, bs []*benchTransport, d time.Duration, prog func(string)) error {
	conns := make([]net.Conn, len(bs))
	for i, b := range bs {
		c, err := b.dial(ctx, svcEcho)
		if err != nil {
			closeAll(conns[:i])
			return fmt.Errorf("%s: %w", b.name, err)
		}
		conns[i] = c
	}
	defer closeAll(conns)
	req := make([]byte, benchPingSize)
	buf := make([]byte, benchPingSize)
	one := func(c net.Conn) (time.Duration, error) {
		s := time.Now()
		if _, err := c.Write(req); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return 0, err
		}
		return time.Since(s), nil
	}
	for i, c := range conns { // warm-up
		c.SetDeadline(time.Now().Add(time.Minute))
		for range 100 {
			if _, err := one(c); err != nil {
				return fmt.Errorf("%s: %w", bs[i].name, err)
			}
		}
	}
	for _, gap := range benchIdleGaps {
		prog(fmt.Sprintf("64 B requests after %v idle", gap))
		n := max(benchIdleMin, int(d/2/gap))
		lat := make([][]time.Duration, len(bs))
		for round := 0; round*benchIdleRound < n; round++ {
			for k := range bs {
				i := (k + round) % len(bs) // who goes first rotates
				conns[i].SetDeadline(time.Now().Add(time.Minute))
				for range benchIdleRound {
					time.Sleep(gap)
					l, err := one(conns[i])
					if err != nil {
						return fmt.Errorf("%s: %w", bs[i].name, err)
					}
					lat[i] = append(lat[i], l)
				}
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		for i, b := range bs {
			rep.row(idleKey(gap, 50), "", "", "").Values[b.name] = us(percentile(lat[i], 50))
			rep.row(idleKey(gap, 99), "", "", "").Values[b.name] = us(percentile(lat[i], 99))
		}
	}
	return nil
}
