package session

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A pool hands back what it was given, emptied, and keeps at most Max.
func TestBufPool(t *testing.T) {
	p := BufPool{Max: 2}
	require.Nil(t, p.Get(), "an empty pool has nothing")
	a, b, c := make([]byte, 3, 8), make([]byte, 5, 16), make([]byte, 1, 32)
	p.Put(a)
	p.Put(b)
	p.Put(c) // over Max: dropped
	got := [][]byte{p.Get(), p.Get()}
	require.Nil(t, p.Get(), "the third buffer was not kept")
	caps := []int{cap(got[0]), cap(got[1])}
	require.ElementsMatch(t, []int{8, 16}, caps)
	for _, g := range got {
		require.Empty(t, g, "a recycled buffer comes back empty")
	}
}
