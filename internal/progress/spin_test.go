package progress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ucxnet/ucxnet/internal/cucx"
)

const us = time.Microsecond

func TestSpinPolicyGrowsToCoverTheGap(t *testing.T) {
	p := newSpinPolicy(50*us, 500*us)
	assert.Equal(t, 50*us, p.window())

	p.observe(250*us, true)
	assert.Equal(t, 250*us, p.window(), "grows to the gap when that is more than double")
	p.observe(150*us, true)
	assert.Equal(t, 500*us, p.window(), "at least doubles, capped at max")
	p.observe(500*us, true)
	assert.Equal(t, 500*us, p.window(), "a gap of exactly max is still worth spinning for")
}

func TestSpinPolicyShrinks(t *testing.T) {
	p := newSpinPolicy(50*us, 500*us)
	p.observe(400*us, true)
	p.observe(400*us, true)
	assert.Equal(t, 500*us, p.window())

	p.observe(501*us, true)
	assert.Equal(t, 250*us, p.window(), "a bulk frame later than max is not worth spinning for")
	p.observe(100*time.Millisecond, false)
	assert.Equal(t, 125*us, p.window(), "nor is silence")
	for range 10 {
		p.observe(time.Second, false)
	}
	assert.Equal(t, 50*us, p.window(), "never below min")

	// Traffic that was not bulk, within max: no evidence either way.
	p.observe(300*us, true)
	p.observe(200*us, false)
	assert.Equal(t, 300*us, p.window())
}

func TestSpinPolicyLimits(t *testing.T) {
	// max at or below min: the window stays at min.
	p := newSpinPolicy(50*us, 0)
	p.observe(10*us, true)
	assert.Equal(t, 50*us, p.window())
	p.observe(time.Second, false)
	assert.Equal(t, 50*us, p.window())

	// min 0: growth comes from the gap alone, shrinking ends at 0.
	p = newSpinPolicy(0, 500*us)
	p.observe(120*us, true)
	assert.Equal(t, 120*us, p.window())
	p.observe(time.Second, false)
	p.observe(time.Second, false)
	assert.Equal(t, 30*us, p.window())

	// Negative values count as zero.
	p = newSpinPolicy(-time.Second, -time.Second)
	p.observe(10*us, true)
	assert.Equal(t, time.Duration(0), p.window())
}

// A stream of bulk frames 250 µs apart, where each gap outlasts the
// window, as the engine sees it: frame, spin, sleep, wake, next frame,
// spin ends, judge.
func TestBulkSpinFollowsAStream(t *testing.T) {
	b := newBulkSpin(50*us, 500*us)
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	assert.False(t, b.spinning(t0), "no bulk frame yet")
	b.frame(at(0))
	assert.True(t, b.spinning(at(49*us)))
	assert.False(t, b.spinning(at(50*us)))
	assert.False(t, b.judge(at(50*us)), "nothing to judge before a sleep")

	b.woke()              // slept from 50 µs, woke for the next frame
	b.frame(at(250 * us)) // which is bulk
	b.frame(at(260 * us)) // more of the burst
	assert.True(t, b.judge(at(300*us)))
	assert.Equal(t, 250*us, b.policy.window(), "the window now covers the gap")
	assert.True(t, b.spinning(at(500*us)), "measured from the last bulk frame")
	assert.False(t, b.judge(at(600*us)), "judged once")
}

func TestBulkSpinIgnoresSmallTraffic(t *testing.T) {
	b := newBulkSpin(50*us, 500*us)
	t0 := time.Unix(1000, 0)
	// Request/response: sleeps ended by small frames only.
	for i := range 10 {
		b.woke()
		assert.True(t, b.judge(t0.Add(time.Duration(i)*100*us)))
	}
	assert.Equal(t, 50*us, b.policy.window())
	assert.False(t, b.spinning(t0), "no bulk frame: no extra spin")

	// After a burst, silence: the idle timeouts halve the window back.
	b.policy.cur = 500 * us
	b.frame(t0)
	b.woke()
	b.judge(t0.Add(100 * time.Millisecond))
	assert.Equal(t, 250*us, b.policy.window())
}

func TestBulkBatch(t *testing.T) {
	small := cucx.Event{Kind: cucx.EventFrame, DataLen: 4 << 10}
	big := cucx.Event{Kind: cucx.EventFrame, DataLen: bulkMin}
	assert.False(t, bulkBatch(nil))
	assert.False(t, bulkBatch([]cucx.Event{small, small, small, small, small, small, small, small, small}),
		"many small frames are request/response traffic, not a stream")
	assert.True(t, bulkBatch([]cucx.Event{small, big}))
}
