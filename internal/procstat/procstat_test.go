package procstat

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tail := " t 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21 22"
	for _, comm := range []string{"(cat)", "(a b)", "(x) S 9 9 (y)", "())", "(()"} {
		st, err := Parse([]byte("123 " + comm + tail))
		require.NoError(t, err, comm)
		require.Equal(t, Stat{State: 't', Start: 424242}, st, comm)
	}
	for _, bad := range []string{"", "123 cat S 1", "123 (cat) S 1 2",
		"1 (c)" + strings.Replace(tail, "424242", "-5", 1), "1 (c)" + strings.Replace(tail, " t ", " tT ", 1)} {
		_, err := Parse([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestReadSelf(t *testing.T) {
	st, err := Read(os.Getpid())
	require.NoError(t, err)
	// The state is the main thread's, which may sleep while another of the
	// process's threads reads it: running or sleeping, never stopped or dead.
	require.Contains(t, "RS", string(st.State), "a process reading its own stat is alive")
	require.NotZero(t, st.Start)
	_, err = Read(1 << 30)
	require.ErrorIs(t, err, os.ErrNotExist)
}
