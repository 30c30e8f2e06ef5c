package auth

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A key file that group or others can read is refused with an error that
// says why; the key is the file less its trailing line end.
func TestPSKKeyFilePermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psk")
	require.NoError(t, os.WriteFile(path, []byte("a key of more than sixteen bytes\r\n"), 0o644))
	_, err := ReadKeyFile(path)
	require.ErrorContains(t, err, "too open")
	require.NoError(t, os.Chmod(path, 0o600))
	k, err := ReadKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, "a key of more than sixteen bytes", string(k))

	_, err = ReadKeyFile(filepath.Join(t.TempDir(), "none"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// Finding 10 of hostile-peer round 2: a key file owned by another user
// (even mode 0600) was used; its owner knows and can change the key. It is
// refused now, as are files that are not regular (a FIFO no longer blocks).
func TestPSKKeyFileOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psk")
	require.NoError(t, os.WriteFile(path, []byte("a key of more than sixteen bytes\n"), 0o600))
	_, err := ReadKeyFile(path)
	require.NoError(t, err, "a key file of this user")

	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err = ReadKeyFile(fifo)
	require.ErrorContains(t, err, "not a regular file")

	if os.Geteuid() != 0 {
		t.Skip("giving the file to another user needs root")
	}
	require.NoError(t, os.Chown(path, 12345, 12345))
	_, err = ReadKeyFile(path)
	require.ErrorContains(t, err, "owned by uid 12345")
	require.NoError(t, os.Chown(path, 0, 0))
	_, err = ReadKeyFile(path)
	require.NoError(t, err, "a key file of root")
}
