package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// ucxnet psk writes a fresh 256-bit key with mode 0600, keeps an existing
// file unless --force, and prints one for "-".
func TestPSKCommand(t *testing.T) {
	runPSK := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), &stdio{In: bytes.NewReader(nil), Out: &out, Err: &errb}, append([]string{"psk"}, args...))
		return code, out.String(), errb.String()
	}
	hexKey := regexp.MustCompile(`^[0-9a-f]{64}\n$`)
	path := filepath.Join(t.TempDir(), "psk")
	old := syscall.Umask(0) // the mode must come from writePSK, not the umask
	defer syscall.Umask(old)

	code, _, stderr := runPSK(path)
	require.Equal(t, 0, code, stderr)
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Regexp(t, hexKey, string(first))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	code, _, stderr = runPSK(path)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "exists")
	kept, _ := os.ReadFile(path)
	require.Equal(t, first, kept)

	code, _, stderr = runPSK("--force", path)
	require.Equal(t, 0, code, stderr)
	second, _ := os.ReadFile(path)
	require.Regexp(t, hexKey, string(second))
	require.NotEqual(t, first, second)
	fi, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	code, out, _ := runPSK("-")
	require.Equal(t, 0, code)
	require.Regexp(t, hexKey, out)

	code, _, _ = runPSK()
	require.Equal(t, 2, code)
}
