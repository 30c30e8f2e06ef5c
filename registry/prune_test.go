package registry

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Prune removes the entries of dead publishers and corrupt files, and
// keeps the entries of live ones (this process's, and one of another
// host, whose liveness is not judged here).
func TestDirPrune(t *testing.T) {
	ctx := context.Background()
	d := newTestDir(t)
	require.NoError(t, d.Register(ctx, testEntry("mine", "")))
	dead := testEntry("dead", "")
	dead.PID, dead.StartTime = deadPID(t), 0
	writeEntryFile(t, d, "dead", dead)
	other := testEntry("elsewhere", "")
	other.Host, other.PID = "another-host", deadPID(t)
	writeEntryFile(t, d, "elsewhere", other)
	require.NoError(t, os.WriteFile(filepath.Join(d.Path(), entryFileName("junk")), []byte("{"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(d.Path(), "notes.txt"), []byte("x"), 0o600))

	removed, err := d.Prune(ctx)
	require.NoError(t, err)
	require.Len(t, removed, 2, "%q", removed)
	require.Contains(t, removed[0]+removed[1], "dead: publisher pid")
	require.Contains(t, removed[0]+removed[1], "(corrupt)")
	require.True(t, entryExists(d, "mine"))
	require.True(t, entryExists(d, "elsewhere"))
	require.False(t, entryExists(d, "dead"))
	require.False(t, entryExists(d, "junk"))
	_, err = os.Stat(filepath.Join(d.Path(), "notes.txt"))
	require.NoError(t, err, "other files are left alone")

	removed, err = d.Prune(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
}
