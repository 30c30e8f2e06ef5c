package progress

import (
	"time"

	"github.com/ucxnet/ucxnet/internal/cucx"
)

// The engine spins for Config.Spin after any activity before it sleeps.
// After a bulk frame it may spin longer: bulkSpin keeps that window, and
// spinPolicy adapts it.
//
// Why: waking a sleeping engine costs 80–130 µs on a small VM. A stream
// whose frames arrive every 200–300 µs (1 MiB frames over TCP) paid that
// for nearly every frame with the fixed 50 µs spin; with a window that
// grows to cover the gap between frames it pays it about once per burst.
// Only bulk frames count: when every wake-up counted, request/response
// traffic (HTTP) spinning longer took CPU from the application on a
// 2-core machine and measured 10–15% fewer requests/s.

// bulkMin is the payload from which a frame counts as bulk.
const bulkMin = 32 << 10

// bulkBatch reports whether evs holds a bulk frame.
func bulkBatch(evs []cucx.Event) bool {
	for i := range evs {
		if evs[i].DataLen >= bulkMin {
			return true
		}
	}
	return false
}

// spinPolicy adapts the spin window after bulk frames the way Linux's
// cpuidle-haltpoll governor adapts its poll time: when the engine slept
// and the next bulk frame came within max of the previous one, a longer
// spin would have caught it, so the window grows to cover that gap (at
// least doubling, at most max); a gap longer than max (or no bulk frame
// at all) halves it, down to min. Pure accounting, no clock.
type spinPolicy struct {
	min, max time.Duration
	cur      time.Duration
}

// newSpinPolicy starts at min. A max at or below min keeps the window at
// min; negative values count as zero.
func newSpinPolicy(lo, hi time.Duration) spinPolicy {
	lo = max(lo, 0)
	hi = max(hi, lo)
	return spinPolicy{min: lo, max: hi, cur: lo}
}

// window is how long to spin after a bulk frame.
func (p *spinPolicy) window() time.Duration { return p.cur }

// observe records a sleep of the engine that began after a bulk frame.
// gap is the time from that frame to the next one (bulk), or to the end of
// the traffic the engine woke to if no bulk frame came (!bulk).
func (p *spinPolicy) observe(gap time.Duration, bulk bool) {
	switch {
	case gap > p.max:
		p.cur = max(p.min, p.cur/2)
	case bulk:
		p.cur = min(p.max, max(2*p.cur, gap))
	}
}

// bulkSpin is the engine goroutine's bookkeeping for the spin after bulk
// frames: when they came, and how each sleep turned out.
type bulkSpin struct {
	policy  spinPolicy
	last    time.Time // the last bulk frame
	prev    time.Time // the last bulk frame before the latest sleep
	first   time.Time // the first bulk frame after it (zero: none yet)
	pending bool      // a sleep not judged yet
}

func newBulkSpin(lo, hi time.Duration) bulkSpin {
	return bulkSpin{policy: newSpinPolicy(lo, hi)}
}

// frame records a batch handled at now that held a bulk frame.
func (b *bulkSpin) frame(now time.Time) {
	if b.pending && b.first.IsZero() {
		b.first = now
	}
	b.last = now
}

// spinning reports whether the window after the last bulk frame is still
// open at now (never before the first: the time since the zero Time
// saturates).
func (b *bulkSpin) spinning(now time.Time) bool {
	return now.Sub(b.last) < b.policy.window()
}

// woke records that the engine slept and woke (for traffic, a submission
// or its timeout).
func (b *bulkSpin) woke() {
	b.pending, b.prev, b.first = true, b.last, time.Time{}
}

// judge rates the latest sleep once the traffic it woke to has passed
// (the engine is about to sleep again). It reports whether it did, so the
// engine looks at the window once more before sleeping.
func (b *bulkSpin) judge(now time.Time) bool {
	if !b.pending {
		return false
	}
	b.pending = false
	switch {
	case b.prev.IsZero():
		// No bulk frame before the sleep: nothing to have spun for.
	case b.first.IsZero():
		b.policy.observe(now.Sub(b.prev), false)
	default:
		b.policy.observe(b.first.Sub(b.prev), true)
	}
	return true
}
