package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The records a peer's input causes are rate-limited, and the next one
// allowed says how many were suppressed.
func TestLogLimiter(t *testing.T) {
	var l LogLimiter
	now := time.Unix(1000, 0)
	for i := 0; i < HostileLogBurst; i++ {
		ok, _ := l.Allow(now)
		require.True(t, ok, "record %d of the burst", i)
	}
	for i := 0; i < 5; i++ {
		ok, _ := l.Allow(now)
		require.False(t, ok)
	}
	ok, suppressed := l.Allow(now.Add(time.Second / HostileLogRate))
	require.True(t, ok, "a token came back")
	require.Equal(t, uint64(5), suppressed)
	ok, _ = l.Allow(now.Add(time.Second / HostileLogRate))
	require.False(t, ok)
}
