package statsock

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testRequest = "test-doc 1\n"

func listen(t *testing.T) *Server {
	t.Helper()
	s, err := Listen(filepath.Join(t.TempDir(), "s.sock"), testRequest, func() any { return map[string]int{"answer": 42} })
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// ask sends req on a new connection to s and returns the whole answer.
func ask(t *testing.T, s *Server, req string) string {
	t.Helper()
	c, err := net.Dial("unix", s.Path())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second))) // a hang guard
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	return string(b)
}

// The request line gets the document and the end of the connection;
// another line gets an error. The socket is this user's alone.
func TestServeDocument(t *testing.T) {
	s := listen(t)
	fi, err := os.Stat(s.Path())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	var doc map[string]int
	require.NoError(t, json.Unmarshal([]byte(ask(t, s, testRequest)), &doc))
	require.Equal(t, map[string]int{"answer": 42}, doc)

	var e map[string]string
	require.NoError(t, json.Unmarshal([]byte(ask(t, s, "what\n")), &e))
	require.Equal(t, "want test-doc 1", e["error"])

	s.Close()
	_, err = os.Stat(s.Path())
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes the socket")
}

// PeerCred names this process at the other end of its own connection.
func TestPeerCred(t *testing.T) {
	s := listen(t)
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Path(), Net: "unix"})
	require.NoError(t, err)
	defer c.Close()
	uid, pid, err := PeerCred(c)
	require.NoError(t, err)
	require.Equal(t, os.Geteuid(), uid)
	require.Equal(t, os.Getpid(), pid)
}

// A client that connects and sends nothing does not hold up Close: the
// connection is ended, not waited out.
func TestSilentClientDoesNotHoldClose(t *testing.T) {
	defer func(d time.Duration) { answerTimeout = d }(answerTimeout)
	answerTimeout = time.Hour
	s := listen(t)
	c, err := net.Dial("unix", s.Path())
	require.NoError(t, err)
	defer c.Close()
	// A byte short of a request line keeps the server reading, once it
	// serves the connection (holds a place of the semaphore).
	_, err = c.Write([]byte("t"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(s.sem) == 1 }, 30*time.Second, time.Millisecond, "the connection is not served")
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(60 * time.Second): // a hang guard, far below the hour
		t.Fatal("Close waits for a silent client")
	}
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the connection is still open")
}

// A path too long for a Unix socket is refused before binding.
func TestListenLongPath(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("x", MaxPath))
	_, err := Listen(long, testRequest, func() any { return nil })
	require.ErrorContains(t, err, "longer than")
}

// CheckDir makes a missing directory 0700, narrows one others may read,
// and refuses one they may write, a file and a symbolic link.
func TestCheckDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "stats")
	require.NoError(t, CheckDir(dir))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, CheckDir(dir))
	fi, err = os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	require.NoError(t, os.Chmod(dir, 0o777))
	require.ErrorContains(t, CheckDir(dir), "group or others may write")

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.ErrorContains(t, CheckDir(file), "not a directory")
	link := filepath.Join(t.TempDir(), "l")
	require.NoError(t, os.Symlink(dir, link))
	require.ErrorContains(t, CheckDir(link), "not a directory", "a symbolic link to a directory")
}
