package progress

import "time"

// spinPolicy decides how long the engine polls after a bulk frame before
// it sleeps. It adapts the way Linux's cpuidle-haltpoll governor does: a
// sleep that bulk traffic ended soon enough that a longer spin would have
// caught it doubles the window (up to max); a sleep longer than max
// halves it (down to min). Pure accounting, no clock: the engine reports
// what happened, and decides what counts as bulk (a frame of at least
// bulkMin bytes).
//
// Why: waking a sleeping engine costs 80–130 µs on a small VM. A stream
// whose frames arrive every 200–300 µs (1 MiB frames over TCP) paid that
// for nearly every frame with the fixed 50 µs spin; with a window that
// grows to cover the gap it pays it about once per burst. Only bulk
// frames count: request/response traffic (HTTP, gRPC) spinning longer
// took CPU from the application on a 2-core machine and measured 10–15%
// fewer requests/s. Gaps longer than max shrink the window back to min,
// so idle and sparse conns keep the low CPU cost of the fixed spin.
type spinPolicy struct {
	min, max time.Duration
	cur      time.Duration
}

// newSpinPolicy starts at min. A max at or below min disables adapting.
func newSpinPolicy(min, max time.Duration) spinPolicy {
	if min < 0 {
		min = 0
	}
	if max < min {
		max = min
	}
	return spinPolicy{min: min, max: max, cur: min}
}

// window is how long to poll after the last activity before sleeping.
func (p *spinPolicy) window() time.Duration { return p.cur }

// slept records a sleep that began after a full spin window and lasted d.
// woken reports whether bulk traffic ended it (not the timeout, nor
// small frames). The gap since the last activity was window()+d: a spin that
// long would have caught the wake-up without sleeping.
func (p *spinPolicy) slept(d time.Duration, woken bool) {
	gap := p.cur + d
	switch {
	case gap > p.max:
		p.cur = max(p.min, p.cur/2)
	case woken:
		p.cur = min(p.max, max(2*p.cur, gap))
	}
}
