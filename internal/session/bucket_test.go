package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A bucket gives burst tokens at once, then rate a second, and never holds
// more than burst.
func TestBucket(t *testing.T) {
	const burst, rate = 128, 128
	var b Bucket
	now := time.Unix(1000, 0)
	for i := range burst {
		require.True(t, b.Take(now, burst, rate), "token %d", i)
	}
	require.False(t, b.Take(now, burst, rate))
	now = now.Add(time.Second / 4)
	for i := range rate / 4 {
		require.True(t, b.Take(now, burst, rate), "refilled token %d", i)
	}
	require.False(t, b.Take(now, burst, rate))
	now = now.Add(time.Hour)
	for range burst {
		require.True(t, b.Take(now, burst, rate))
	}
	require.False(t, b.Take(now, burst, rate), "the bucket holds at most burst")
}
