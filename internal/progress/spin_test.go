package progress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ucxnet/ucxnet/internal/cucx"
)

const us = time.Microsecond

func TestSpinPolicyGrowsWhileTrafficEndsShortSleeps(t *testing.T) {
	p := newSpinPolicy(50*us, 500*us)
	assert.Equal(t, 50*us, p.window())

	// Frames 250 µs apart: each sleep ends after about 200 µs. The window
	// must grow past the gap so the next frame is caught spinning.
	p.slept(200*us, true)
	assert.Equal(t, 250*us, p.window(), "grows to the whole gap when that is more than double")
	p.slept(100*us, true)
	assert.Equal(t, 500*us, p.window(), "doubles, capped at max")
	// A sleep after a spin of max means a gap longer than max: not worth
	// spinning for, so halve.
	p.slept(10*us, true)
	assert.Equal(t, 250*us, p.window())
}

func TestSpinPolicyShrinksWhenQuiet(t *testing.T) {
	p := newSpinPolicy(50*us, 500*us)
	p.slept(100*us, true)
	p.slept(100*us, true)
	p.slept(50*us, true)
	assert.Equal(t, 500*us, p.window())

	// The stream stopped: the next sleep runs to the idle backstop.
	p.slept(100*time.Millisecond, false)
	assert.Equal(t, 250*us, p.window())
	// Traffic that comes later than max is not worth spinning for either.
	p.slept(2*time.Millisecond, true)
	assert.Equal(t, 125*us, p.window())
	for range 10 {
		p.slept(100*time.Millisecond, false)
	}
	assert.Equal(t, 50*us, p.window(), "never below min")
}

func TestSpinPolicyTimeoutWithinMaxKeepsWindow(t *testing.T) {
	// A short poll that timed out (the engine's 1 ms poll while UCX holds
	// sends, with a larger max) says nothing about traffic: no change.
	p := newSpinPolicy(50*us, 5*time.Millisecond)
	p.slept(time.Millisecond, false)
	assert.Equal(t, 50*us, p.window())
}

func TestSpinPolicyFixed(t *testing.T) {
	// max at or below min: the spin stays where it was set.
	p := newSpinPolicy(50*us, 0)
	p.slept(10*us, true)
	assert.Equal(t, 50*us, p.window())
	p.slept(time.Second, false)
	assert.Equal(t, 50*us, p.window())

	// Spinning off entirely.
	p = newSpinPolicy(0, 0)
	p.slept(10*us, true)
	assert.Equal(t, time.Duration(0), p.window())
}

func TestBulkBatch(t *testing.T) {
	small := cucx.Event{Kind: cucx.EventFrame, DataLen: 4 << 10}
	big := cucx.Event{Kind: cucx.EventFrame, DataLen: bulkMin}
	assert.False(t, bulkBatch(nil))
	assert.False(t, bulkBatch([]cucx.Event{small, small, small, small, small, small, small, small, small}),
		"many small frames are request/response traffic, not a stream")
	assert.True(t, bulkBatch([]cucx.Event{small, big}))
}
