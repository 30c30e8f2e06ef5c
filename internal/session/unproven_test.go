package session

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Unproven streams are bounded per peer and in all, the oldest evicted
// first: one peer's flood evicts its own, not another's.
func TestUnproven(t *testing.T) {
	var u Unproven[int, string]
	for i := range 3 {
		_, evicted := u.Add(i, "a", 3, 5)
		require.False(t, evicted)
	}
	evict, evicted := u.Add(3, "a", 3, 5)
	require.True(t, evicted)
	require.Equal(t, 0, evict, "a's oldest, at a's bound")
	_, evicted = u.Add(10, "b", 3, 5)
	require.False(t, evicted)
	_, evicted = u.Add(11, "b", 3, 5)
	require.False(t, evicted)
	require.Equal(t, 5, u.Len())
	evict, evicted = u.Add(20, "c", 3, 5)
	require.True(t, evicted)
	require.Equal(t, 1, evict, "the oldest of all, at the bound in all")
	u.Remove(2)
	u.Remove(99) // not there: nothing
	require.Equal(t, 4, u.Len())
	_, evicted = u.Add(4, "a", 3, 5)
	require.False(t, evicted, "a has 1 left (3), b 2, c 1: room for 1")
	require.Equal(t, 5, u.Len())
}
