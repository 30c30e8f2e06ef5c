package registry

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newTestDir(t *testing.T) *Dir {
	t.Helper()
	d, err := NewDir(t.TempDir())
	require.NoError(t, err)
	return d
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	pid := cmd.Process.Pid
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	return pid
}

// writeEntryFile writes e as the file of name, bypassing Register.
func writeEntryFile(t *testing.T, d *Dir, name string, e Entry) {
	t.Helper()
	data, err := json.Marshal(e)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(d.Path(), entryFileName(name)), data, 0o600))
}

func entryExists(d *Dir, name string) bool {
	_, err := os.Lstat(filepath.Join(d.Path(), entryFileName(name)))
	return err == nil
}

func TestDirStaleDeadPID(t *testing.T) {
	ctx := context.Background()
	d := newTestDir(t)
	e := testEntry("stale", "svc")
	e.PID = deadPID(t)
	e.StartTime = 0
	writeEntryFile(t, d, "stale", e)

	// Register replaces a stale entry.
	require.NoError(t, d.Register(ctx, testEntry("stale", "svc")))
	got, err := d.Resolve(ctx, "stale")
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), got.PID)

	// Resolve removes a stale entry and says so.
	e.Name = "stale2"
	writeEntryFile(t, d, "stale2", e)
	_, err = d.Resolve(ctx, "stale2")
	require.ErrorIs(t, err, ErrNotFound)
	require.Contains(t, err.Error(), "stale")
	require.Contains(t, err.Error(), `"stale2"`)
	require.False(t, entryExists(d, "stale2"))
	require.NoError(t, d.Register(ctx, testEntry("stale2", "")))

	// Instances skips and removes stale entries.
	e.Name = "stale3"
	writeEntryFile(t, d, "stale3", e)
	got3, err := d.Instances(ctx, "svc")
	require.NoError(t, err)
	require.Equal(t, []Entry{testEntry("stale", "svc")}, got3)
	require.False(t, entryExists(d, "stale3"))
}

func TestDirStaleStartTime(t *testing.T) {
	ctx := context.Background()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	d := newTestDir(t)
	e := testEntry("reused", "")
	require.NotZero(t, e.StartTime)
	e.StartTime++
	writeEntryFile(t, d, "reused", e)
	_, err := d.Resolve(ctx, "reused")
	require.ErrorIs(t, err, ErrNotFound)
	require.Contains(t, err.Error(), "stale")
	require.Contains(t, err.Error(), "reused")
	require.False(t, entryExists(d, "reused"))

	writeEntryFile(t, d, "reused", e)
	require.NoError(t, d.Register(ctx, testEntry("reused", "")))
	got, err := d.Resolve(ctx, "reused")
	require.NoError(t, err)
	require.Equal(t, testEntry("reused", ""), got)
}

func TestDirLivenessAssumptions(t *testing.T) {
	ctx := context.Background()
	d := newTestDir(t)
	dead := deadPID(t)

	// Another host: assumed live even though the pid is dead here.
	e := testEntry("remote", "")
	e.Host = "some-other-host"
	e.PID = dead
	writeEntryFile(t, d, "remote", e)
	got, err := d.Resolve(ctx, "remote")
	require.NoError(t, err)
	require.Equal(t, e, got)
	require.ErrorIs(t, d.Register(ctx, testEntry("remote", "")), ErrNameInUse)

	// PID 0: unknown, assumed live.
	e = testEntry("nopid", "")
	e.PID = 0
	e.StartTime = 0
	require.NoError(t, d.Register(ctx, e))
	_, err = d.Resolve(ctx, "nopid")
	require.NoError(t, err)

	// A live process we may not own (pid 1) is live.
	e = testEntry("init", "")
	e.PID = 1
	e.StartTime = 0
	require.NoError(t, d.Register(ctx, e))
	_, err = d.Resolve(ctx, "init")
	require.NoError(t, err)
}

func TestDirUnregisterOnlyOwn(t *testing.T) {
	ctx := context.Background()
	d := newTestDir(t)
	e := testEntry("theirs", "")
	e.PID = 1
	e.StartTime = 0
	writeEntryFile(t, d, "theirs", e)
	require.NoError(t, d.Unregister(ctx, "theirs"))
	require.True(t, entryExists(d, "theirs"))

	e.Host = "elsewhere"
	e.PID = os.Getpid()
	writeEntryFile(t, d, "theirs", e)
	require.NoError(t, d.Unregister(ctx, "theirs"))
	require.True(t, entryExists(d, "theirs"))

	// Another Dir value in this process may unregister (pid match).
	require.NoError(t, d.Register(ctx, testEntry("mine", "")))
	d2, err := NewDir(d.Path())
	require.NoError(t, err)
	require.NoError(t, d2.Unregister(ctx, "mine"))
	require.False(t, entryExists(d, "mine"))

	require.NoError(t, d.Unregister(ctx, "bad\x00name"))
}

func TestDirCorrupt(t *testing.T) {
	ctx := context.Background()
	valid, err := json.Marshal(testEntry("x", ""))
	require.NoError(t, err)
	other, err := json.Marshal(testEntry("y", ""))
	require.NoError(t, err)
	noAddr := testEntry("x", "")
	noAddr.Address = nil
	noAddrJSON, err := json.Marshal(noAddr)
	require.NoError(t, err)

	cases := map[string][]byte{
		"garbage":   []byte("not json at all \x00\xff"),
		"empty":     nil,
		"truncated": valid[:len(valid)/2],
		"mismatch":  other,
		"invalid":   noAddrJSON,
		"trailing":  append(append([]byte{}, valid...), []byte(`{"x":1}`)...),
		"array":     []byte(`[1,2,3]`),
		"wrongtype": []byte(`{"name":"x","address":"!!notbase64","pid":"one"}`),
		"huge":      append(append([]byte{}, valid...), make([]byte, maxEntryFile)...),
	}
	for what, data := range cases {
		t.Run(what, func(t *testing.T) {
			d := newTestDir(t)
			p := filepath.Join(d.Path(), entryFileName("x"))
			require.NoError(t, os.WriteFile(p, data, 0o600))
			_, err := d.Resolve(ctx, "x")
			require.ErrorIs(t, err, ErrNotFound)
			require.Contains(t, err.Error(), "corrupt")
			require.Contains(t, err.Error(), `"x"`)
			require.NoFileExists(t, p)

			require.NoError(t, os.WriteFile(p, data, 0o600))
			got, err := d.Instances(ctx, "")
			require.NoError(t, err)
			require.Empty(t, got)
			require.NoFileExists(t, p)

			require.NoError(t, os.WriteFile(p, data, 0o600))
			require.NoError(t, d.Register(ctx, testEntry("x", "")))
			e, err := d.Resolve(ctx, "x")
			require.NoError(t, err)
			require.Equal(t, testEntry("x", ""), e)
		})
	}

	t.Run("fifo", func(t *testing.T) {
		d := newTestDir(t)
		p := filepath.Join(d.Path(), entryFileName("x"))
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		done := make(chan error, 1)
		go func() { _, err := d.Resolve(ctx, "x"); done <- err }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrNotFound)
			require.Contains(t, err.Error(), "corrupt")
		case <-time.After(5 * time.Second):
			t.Fatal("Resolve blocked on a FIFO")
		}
	})
	t.Run("symlink", func(t *testing.T) {
		d := newTestDir(t)
		target := filepath.Join(t.TempDir(), "target")
		require.NoError(t, os.WriteFile(target, valid, 0o600))
		p := filepath.Join(d.Path(), entryFileName("x"))
		require.NoError(t, os.Symlink(target, p))
		_, err := d.Resolve(ctx, "x")
		require.ErrorIs(t, err, ErrNotFound)
		require.Contains(t, err.Error(), "corrupt")
		require.FileExists(t, target)
	})
}

func TestDirIgnoresOtherFiles(t *testing.T) {
	ctx := context.Background()
	d := newTestDir(t)
	require.NoError(t, d.Register(ctx, testEntry("real", "")))
	for _, f := range []string{"README", "x.json", ".hidden.entry", ".tmp-123", "entry"} {
		require.NoError(t, os.WriteFile(filepath.Join(d.Path(), f), []byte("junk"), 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(d.Path(), "subdir"), 0o700))
	got, err := d.Instances(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []Entry{testEntry("real", "")}, got)
	for _, f := range []string{"README", "x.json", ".hidden.entry", ".tmp-123", "entry", ".lock", "subdir"} {
		_, err := os.Lstat(filepath.Join(d.Path(), f))
		require.NoError(t, err, f)
	}
}

func TestDirModes(t *testing.T) {
	ctx := context.Background()
	oldMask := syscall.Umask(0)
	defer syscall.Umask(oldMask)

	path := filepath.Join(t.TempDir(), "a", "b", "reg")
	d, err := NewDir(path)
	require.NoError(t, err)
	for _, p := range []string{filepath.Dir(path), path} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), p)
	}
	require.NoError(t, d.Register(ctx, testEntry("m", "")))
	des, err := os.ReadDir(path)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
		fi, err := de.Info()
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), de.Name())
	}
	// No temporary files are left behind.
	require.ElementsMatch(t, []string{".lock", "m.entry"}, names)

	// A failed Register leaves no temporary file either.
	require.ErrorIs(t, d.Register(ctx, testEntry("m", "")), ErrNameInUse)
	des, err = os.ReadDir(path)
	require.NoError(t, err)
	require.Len(t, des, 2)
}

func TestDirUnsafe(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, 0o702, 0o720, 0o722} {
		p := filepath.Join(t.TempDir(), "reg")
		require.NoError(t, os.Mkdir(p, 0o700))
		require.NoError(t, os.Chmod(p, mode))
		_, err := NewDir(p)
		require.ErrorIs(t, err, ErrUnsafeDir, "%o", mode)
		require.Contains(t, err.Error(), p)
		require.Contains(t, err.Error(), fmt.Sprintf("%#o", mode))
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode().Perm(), "NewDir must not chmod")
	}
	for _, mode := range []os.FileMode{0o700, 0o500, 0o750, 0o755, 0o701, 0o704, 0o705} {
		p := filepath.Join(t.TempDir(), "reg")
		require.NoError(t, os.Mkdir(p, mode))
		require.NoError(t, os.Chmod(p, mode))
		_, err := NewDir(p)
		require.NoError(t, err, "%o", mode)
		// Readable by others but not writable: tightened to owner only.
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, mode&0o700, fi.Mode().Perm(), "%o", mode)
	}

	// Not a directory.
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	_, err := NewDir(f)
	require.Error(t, err)

	// Owned by someone else.
	p := filepath.Join(t.TempDir(), "foreign")
	require.NoError(t, os.Mkdir(p, 0o700))
	if err := os.Chown(p, 12345, 12345); err != nil {
		t.Skipf("cannot chown (not root?): %v", err)
	}
	_, err = NewDir(p)
	require.ErrorIs(t, err, ErrUnsafeDir)
	require.Contains(t, err.Error(), p)
	require.Contains(t, err.Error(), "uid 12345")
	require.Contains(t, err.Error(), "0700")
}

func TestDirConcurrentRegister(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir()
	const n = 20
	dirs := make([]*Dir, n)
	for i := range dirs {
		d, err := NewDir(path)
		require.NoError(t, err)
		dirs[i] = d
	}
	for round := range 5 {
		name := fmt.Sprintf("contended-%d", round)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				e := testEntry(name, "")
				e.Meta = map[string]string{"winner": fmt.Sprint(i)}
				errs[i] = dirs[i].Register(ctx, e)
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		winner := -1
		for i, err := range errs {
			if err == nil {
				wins++
				winner = i
			} else {
				require.ErrorIs(t, err, syscall.EADDRINUSE)
			}
		}
		require.Equal(t, 1, wins)
		got, err := dirs[0].Resolve(ctx, name)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(winner), got.Meta["winner"])
	}
}

const helperEnv = "UCXNET_REGISTRY_TEST_HELPER"

// TestHelperProcess is not a test: TestDirCrossProcess runs the test binary
// with it as a child that registers one name and reports the outcome.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process only")
	}
	in := bufio.NewReader(os.Stdin)
	_, _ = in.ReadString('\n') // wait for "go"
	d, err := NewDir(os.Getenv("UCXNET_REGISTRY_TEST_DIR"))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	err = d.Register(context.Background(), testEntry(os.Getenv("UCXNET_REGISTRY_TEST_NAME"), ""))
	switch {
	case err == nil:
		fmt.Println("OK")
	case errors.Is(err, syscall.EADDRINUSE):
		fmt.Println("INUSE")
	default:
		fmt.Println("ERR", err)
	}
	// Stay alive, so that the entry stays live, until the parent is done.
	_, _ = io.Copy(io.Discard, in)
	os.Exit(0)
}

func TestDirCrossProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := t.TempDir()
	const n = 8
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	children := make([]child, n)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(),
			helperEnv+"=1",
			"GORACE=atexit_sleep_ms=0",
			"UCXNET_REGISTRY_TEST_DIR="+path,
			"UCXNET_REGISTRY_TEST_NAME=shared/name:1",
		)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		children[i] = child{cmd, stdin, bufio.NewReader(stdout)}
	}
	defer func() {
		for _, c := range children {
			c.stdin.Close()
			_ = c.cmd.Wait()
		}
	}()
	for _, c := range children {
		_, err := io.WriteString(c.stdin, "go\n")
		require.NoError(t, err)
	}
	counts := map[string]int{}
	winnerPID := 0
	for _, c := range children {
		line, err := c.out.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimSpace(line)
		counts[line]++
		if line == "OK" {
			winnerPID = c.cmd.Process.Pid
		}
	}
	require.Equal(t, map[string]int{"OK": 1, "INUSE": n - 1}, counts)

	d, err := NewDir(path)
	require.NoError(t, err)
	ctx := context.Background()
	e, err := d.Resolve(ctx, "shared/name:1")
	require.NoError(t, err)
	require.Equal(t, winnerPID, e.PID)

	// Once the children are gone the entry is stale.
	for _, c := range children {
		c.stdin.Close()
	}
	for _, c := range children {
		require.NoError(t, c.cmd.Wait())
	}
	children = nil
	_, err = d.Resolve(ctx, "shared/name:1")
	require.ErrorIs(t, err, ErrNotFound)
	require.Contains(t, err.Error(), "stale")
}

func TestEntryFileName(t *testing.T) {
	names := specialNames()
	names = append(names, "%", "%25", "_", "-", "a.", ".a", "a..b", "~", strings.Repeat("a/", 127))
	seen := map[string]string{}
	for _, n := range names {
		f := entryFileName(n)
		require.LessOrEqual(t, len(f), 255, "%q", n)
		require.True(t, strings.HasSuffix(f, entrySuffix))
		require.False(t, strings.HasPrefix(f, "."), "%q -> %q", n, f)
		require.NotContains(t, f, "/")
		require.NotContains(t, f, "\x00")
		if prev, ok := seen[f]; ok {
			t.Fatalf("%q and %q both map to %q", prev, n, f)
		}
		seen[f] = n
	}
	require.Equal(t, "plain.entry", entryFileName("plain"))
	require.Equal(t, "a%2Fb.entry", entryFileName("a/b"))
	require.Equal(t, "%2E..entry", entryFileName(".."))
	require.True(t, strings.HasPrefix(entryFileName(strings.Repeat("€", 85)), "~"))
}

func FuzzJudge(f *testing.F) {
	valid, _ := json.Marshal(testEntry("x", ""))
	f.Add(valid)
	f.Add([]byte(`{"name":"x","address":"AA==","pid":-1}`))
	f.Add([]byte(`{"name":"x","address":"AA==","pid":99999999,"host":"h","start_time":18446744073709551615}`))
	f.Add([]byte(`null`))
	f.Add([]byte{0xff, 0x00})
	d := &Dir{path: f.TempDir(), host: hostname(), pid: os.Getpid()}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := d.judge(entryFileName("x"), data)
		if l.v == live || l.v == stale {
			require.NoError(t, l.entry.Validate())
			require.Equal(t, "x", l.entry.Name)
		}
	})
}
