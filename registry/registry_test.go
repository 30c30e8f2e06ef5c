package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// backends lists the implementations that must honour the shared contract.
var backends = []struct {
	name string
	open func(t *testing.T) Registry
}{
	{"dir", func(t *testing.T) Registry {
		d, err := NewDir(t.TempDir())
		require.NoError(t, err)
		return d
	}},
	{"memory", func(t *testing.T) Registry { return NewMemory() }},
}

// testEntry returns a valid entry for name published by this process.
func testEntry(name, service string) Entry {
	pid, st, host := CurrentProcess()
	return Entry{
		Name:      name,
		Service:   service,
		Address:   []byte("addr-of-" + name),
		PID:       pid,
		StartTime: st,
		Host:      host,
		Meta:      map[string]string{"k": "v"},
	}
}

// specialNames are valid names that stress the file-name escaping.
func specialNames() []string {
	return []string{
		"plain",
		"a/b/c",
		"/leading/slash",
		"../../etc/passwd",
		"host:1234",
		"ünïcødé-名前-🚀",
		".",
		"..",
		".lock",
		".tmp-123",
		"a.entry",
		"%41",
		"A",
		"~hash",
		"with space",
		"back\\slash",
		strings.Repeat("x", 255),
		strings.Repeat("€", 85), // 255 bytes, escapes to 765
		strings.Repeat("/", 255),
	}
}

func TestContract(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Run("RoundTrip", func(t *testing.T) {
				r := b.open(t)
				e := testEntry("svc-1", "svc")
				require.NoError(t, r.Register(ctx, e))
				got, err := r.Resolve(ctx, "svc-1")
				require.NoError(t, err)
				require.Equal(t, e, got)
			})
			t.Run("NameInUse", func(t *testing.T) {
				r := b.open(t)
				require.NoError(t, r.Register(ctx, testEntry("dup", "")))
				err := r.Register(ctx, testEntry("dup", ""))
				require.ErrorIs(t, err, ErrNameInUse)
				require.ErrorIs(t, err, syscall.EADDRINUSE)
				require.True(t, errors.Is(err, syscall.EADDRINUSE))
				require.Contains(t, err.Error(), "dup")
				// The first entry is untouched.
				got, err := r.Resolve(ctx, "dup")
				require.NoError(t, err)
				require.Equal(t, testEntry("dup", ""), got)
			})
			t.Run("Unregister", func(t *testing.T) {
				r := b.open(t)
				require.NoError(t, r.Unregister(ctx, "never-registered"))
				require.NoError(t, r.Register(ctx, testEntry("u", "")))
				require.NoError(t, r.Unregister(ctx, "u"))
				_, err := r.Resolve(ctx, "u")
				require.ErrorIs(t, err, ErrNotFound)
				require.NoError(t, r.Unregister(ctx, "u"))
				require.NoError(t, r.Register(ctx, testEntry("u", "")))
				_, err = r.Resolve(ctx, "u")
				require.NoError(t, err)
			})
			t.Run("NotFound", func(t *testing.T) {
				r := b.open(t)
				_, err := r.Resolve(ctx, "nobody")
				require.ErrorIs(t, err, ErrNotFound)
				require.Contains(t, err.Error(), "nobody")
				_, err = r.Resolve(ctx, "")
				require.ErrorIs(t, err, ErrNotFound)
			})
			t.Run("InvalidEntry", func(t *testing.T) {
				r := b.open(t)
				for _, mod := range []func(*Entry){
					func(e *Entry) { e.Address = nil },
					func(e *Entry) { e.Address = make([]byte, MaxAddressLen+1) },
					func(e *Entry) { e.PID = -1 },
					func(e *Entry) { e.Name = "" },
					func(e *Entry) { e.Name = "bad\x00name" },
				} {
					e := testEntry("inv", "")
					mod(&e)
					require.ErrorIs(t, r.Register(ctx, e), ErrInvalidEntry)
				}
				e := testEntry("maxaddr", "")
				e.Address = make([]byte, MaxAddressLen)
				require.NoError(t, r.Register(ctx, e))
			})
			t.Run("Instances", func(t *testing.T) {
				r := b.open(t)
				for _, n := range []string{"b-2", "b-1", "b-3"} {
					require.NoError(t, r.Register(ctx, testEntry(n, "beta")))
				}
				require.NoError(t, r.Register(ctx, testEntry("a-1", "alpha")))
				require.NoError(t, r.Register(ctx, testEntry("lonely", "")))

				got, err := r.Instances(ctx, "beta")
				require.NoError(t, err)
				require.Equal(t, []Entry{testEntry("b-1", "beta"), testEntry("b-2", "beta"), testEntry("b-3", "beta")}, got)

				got, err = r.Instances(ctx, "alpha")
				require.NoError(t, err)
				require.Equal(t, []Entry{testEntry("a-1", "alpha")}, got)

				got, err = r.Instances(ctx, "gamma")
				require.NoError(t, err)
				require.NotNil(t, got)
				require.Empty(t, got)

				require.NoError(t, r.Unregister(ctx, "b-2"))
				got, err = r.Instances(ctx, "beta")
				require.NoError(t, err)
				require.Len(t, got, 2)
			})
			t.Run("SpecialNames", func(t *testing.T) {
				r := b.open(t)
				names := specialNames()
				for _, n := range names {
					require.NoError(t, ValidName(n), "%q", n)
					require.NoError(t, r.Register(ctx, testEntry(n, "special")), "%q", n)
				}
				for _, n := range names {
					got, err := r.Resolve(ctx, n)
					require.NoError(t, err, "%q", n)
					require.Equal(t, testEntry(n, "special"), got)
					require.ErrorIs(t, r.Register(ctx, testEntry(n, "special")), ErrNameInUse, "%q", n)
				}
				got, err := r.Instances(ctx, "special")
				require.NoError(t, err)
				require.Len(t, got, len(names))
				for i := 1; i < len(got); i++ {
					require.Less(t, got[i-1].Name, got[i].Name)
				}
				for _, n := range names {
					require.NoError(t, r.Unregister(ctx, n))
				}
				got, err = r.Instances(ctx, "special")
				require.NoError(t, err)
				require.Empty(t, got)
			})
			t.Run("Copies", func(t *testing.T) {
				r := b.open(t)
				e := testEntry("c", "")
				require.NoError(t, r.Register(ctx, e))
				e.Address[0] = 'X'
				e.Meta["k"] = "changed"
				got, err := r.Resolve(ctx, "c")
				require.NoError(t, err)
				require.Equal(t, testEntry("c", ""), got)
				got.Address[0] = 'Y'
				got.Meta["k"] = "changed"
				again, err := r.Resolve(ctx, "c")
				require.NoError(t, err)
				require.Equal(t, testEntry("c", ""), again)
			})
			t.Run("CanceledContext", func(t *testing.T) {
				r := b.open(t)
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				require.ErrorIs(t, r.Register(cctx, testEntry("x", "")), context.Canceled)
				_, err := r.Resolve(cctx, "x")
				require.ErrorIs(t, err, context.Canceled)
				_, err = r.Instances(cctx, "")
				require.ErrorIs(t, err, context.Canceled)
				require.ErrorIs(t, r.Unregister(cctx, "x"), context.Canceled)
			})
			t.Run("String", func(t *testing.T) {
				r := b.open(t)
				require.NotEmpty(t, r.String())
			})
		})
	}
}

func TestValidName(t *testing.T) {
	for _, n := range specialNames() {
		require.NoError(t, ValidName(n), "%q", n)
	}
	for _, n := range []string{
		"",
		strings.Repeat("x", 256),
		strings.Repeat("€", 85) + "x",
		"nul\x00",
		"new\nline",
		"tab\t",
		"del\x7f",
		"c1\u0085",
		"bad utf8 \xff",
	} {
		err := ValidName(n)
		require.ErrorIs(t, err, ErrInvalidName, "%q", n)
		e := testEntry(n, "")
		err = e.Validate()
		require.ErrorIs(t, err, ErrInvalidEntry, "%q", n)
		require.ErrorIs(t, err, ErrInvalidName, "%q", n)
	}
}

func TestUniqueName(t *testing.T) {
	re := regexp.MustCompile(`^ucx-` + strconv.Itoa(os.Getpid()) + `-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		n := UniqueName()
		require.Regexp(t, re, n)
		require.NoError(t, ValidName(n))
		require.False(t, seen[n])
		seen[n] = true
	}
}

func TestCurrentProcess(t *testing.T) {
	pid, st, host := CurrentProcess()
	require.Equal(t, os.Getpid(), pid)
	h, err := os.Hostname()
	require.NoError(t, err)
	require.Equal(t, h, host)
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		require.NotZero(t, st)
		want, err := procStartTime(os.Getpid())
		require.NoError(t, err)
		require.Equal(t, want, st)
	}
}

func TestErrNameInUse(t *testing.T) {
	require.ErrorIs(t, ErrNameInUse, syscall.EADDRINUSE)
	err := fmt.Errorf("listen: %w", fmt.Errorf("%w: x", ErrNameInUse))
	require.ErrorIs(t, err, ErrNameInUse)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.NotErrorIs(t, err, syscall.ENOENT)
	require.NotErrorIs(t, ErrNotFound, syscall.EADDRINUSE)
}

func TestDefaultDir(t *testing.T) {
	t.Setenv(EnvRegistryDir, "/some/where")
	require.Equal(t, "/some/where", DefaultDir())

	t.Setenv(EnvRegistryDir, "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	cache := filepath.Join(home, ".cache", "ucxnet")
	xdg := t.TempDir()
	require.NoError(t, os.Chmod(xdg, 0o700))
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	require.Equal(t, filepath.Join(xdg, "ucxnet"), DefaultDir())

	// An XDG_RUNTIME_DIR that is missing, open to others, or a link is
	// passed over for the cache directory; /tmp is never used.
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(xdg, "does-not-exist"))
	require.Equal(t, cache, DefaultDir())
	open := t.TempDir()
	require.NoError(t, os.Chmod(open, 0o755))
	t.Setenv("XDG_RUNTIME_DIR", open)
	require.Equal(t, cache, DefaultDir())
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(xdg, link))
	t.Setenv("XDG_RUNTIME_DIR", link)
	require.Equal(t, cache, DefaultDir())

	t.Setenv("XDG_RUNTIME_DIR", "")
	require.Equal(t, cache, DefaultDir())
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "c"))
	require.Equal(t, filepath.Join(home, "c", "ucxnet"), DefaultDir())

	// Opening the default creates it with mode 0700.
	r, err := Open("")
	require.NoError(t, err)
	require.Equal(t, "dir:"+filepath.Join(home, "c", "ucxnet"), r.String())
	fi, err := os.Lstat(filepath.Join(home, "c", "ucxnet"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

func TestDefaultDirUnusable(t *testing.T) {
	t.Setenv(EnvRegistryDir, "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	require.Equal(t, "", DefaultDir())
	_, err := DefaultDirErr()
	require.ErrorContains(t, err, "XDG_RUNTIME_DIR is not set")
	for _, spec := range []string{"", "dir", "dir:"} {
		_, err = Open(spec)
		require.ErrorContains(t, err, "no default registry directory", "%q", spec)
		require.ErrorContains(t, err, EnvRegistry+"=dir:/path", "%q", spec)
	}

	// A default directory writable by others is refused, not fixed, and the
	// error says which directory, what is wrong and the way out.
	home := t.TempDir()
	t.Setenv("HOME", home)
	def := filepath.Join(home, ".cache", "ucxnet")
	require.NoError(t, os.MkdirAll(def, 0o700))
	require.NoError(t, os.Chmod(def, 0o775))
	_, err = Open("")
	require.ErrorIs(t, err, ErrUnsafeDir)
	require.ErrorContains(t, err, "default registry directory unusable")
	require.ErrorContains(t, err, def)
	require.ErrorContains(t, err, "0775")
	require.ErrorContains(t, err, EnvRegistry+"=dir:/path")
	fi, err := os.Stat(def)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o775), fi.Mode().Perm())
}

func TestDirCreatedModeDespiteUmask(t *testing.T) {
	old := syscall.Umask(0o277) // would leave 0500
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "reg")
	_, err := NewDir(p)
	require.NoError(t, err)
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

func TestDirRefusesLinks(t *testing.T) {
	// A link to a directory of ours, even a private one, is not followed.
	target := t.TempDir()
	require.NoError(t, os.Chmod(target, 0o700))
	link := filepath.Join(t.TempDir(), "reg")
	require.NoError(t, os.Symlink(target, link))
	_, err := NewDir(link)
	require.ErrorIs(t, err, ErrUnsafeDir)
	require.ErrorContains(t, err, "symbolic link")
	require.ErrorContains(t, err, EnvRegistry+"=dir:/path")

	// A dangling link is not created through either.
	dangling := filepath.Join(t.TempDir(), "dangling")
	require.NoError(t, os.Symlink(filepath.Join(target, "new"), dangling))
	_, err = NewDir(dangling)
	require.ErrorIs(t, err, ErrUnsafeDir)
	_, err = os.Lstat(filepath.Join(target, "new"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestOpen(t *testing.T) {
	base := t.TempDir()
	def := filepath.Join(base, "default")
	t.Setenv(EnvRegistryDir, def)

	for _, spec := range []string{"", "dir", "dir:", "  dir  "} {
		r, err := Open(spec)
		require.NoError(t, err, "%q", spec)
		d, ok := r.(*Dir)
		require.True(t, ok, "%q", spec)
		require.Equal(t, def, d.Path())
		require.Equal(t, "dir:"+def, r.String())
	}
	fi, err := os.Stat(def)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	other := filepath.Join(base, "other")
	for _, spec := range []string{"dir:" + other, "dir://" + other, "DIR:" + other, other} {
		r, err := Open(spec)
		require.NoError(t, err, "%q", spec)
		require.Equal(t, "dir:"+other, r.String(), "%q", spec)
	}

	m1, err := Open("mem:")
	require.NoError(t, err)
	require.IsType(t, &Memory{}, m1)
	for _, spec := range []string{"mem:", "memory:", "mem", "memory", "MEM:"} {
		m, err := Open(spec)
		require.NoError(t, err)
		require.Same(t, m1, m, "%q", spec)
	}
	require.Equal(t, "mem:", m1.String())
	named, err := Open("mem:isolated")
	require.NoError(t, err)
	require.NotSame(t, m1, named)
	named2, err := Open("memory:isolated")
	require.NoError(t, err)
	require.Same(t, named, named2)

	// The shared instance really is shared.
	ctx := context.Background()
	n := UniqueName()
	require.NoError(t, m1.Register(ctx, testEntry(n, "")))
	t.Cleanup(func() { _ = m1.Unregister(ctx, n) })
	m2, err := Open("memory:")
	require.NoError(t, err)
	_, err = m2.Resolve(ctx, n)
	require.NoError(t, err)

	for _, spec := range []string{"bogus:x", "bogus", "etcd://h/p"} {
		_, err := Open(spec)
		require.ErrorIs(t, err, ErrUnknownScheme, "%q", spec)
	}

	_, err = Open("dir:" + filepath.Join(base, "f", "x"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(base, "file"), nil, 0o600))
	_, err = Open("dir:" + filepath.Join(base, "file"))
	require.Error(t, err)
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvRegistry, "mem:")
	r, err := FromEnv()
	require.NoError(t, err)
	m, _ := Open("mem:")
	require.Same(t, m, r)

	p := t.TempDir()
	t.Setenv(EnvRegistry, "dir:"+p)
	r, err = FromEnv()
	require.NoError(t, err)
	require.Equal(t, "dir:"+p, r.String())

	d := filepath.Join(t.TempDir(), "envdefault")
	t.Setenv(EnvRegistry, "")
	t.Setenv(EnvRegistryDir, d)
	r, err = FromEnv()
	require.NoError(t, err)
	require.Equal(t, "dir:"+d, r.String())

	t.Setenv(EnvRegistry, "nope:")
	_, err = FromEnv()
	require.ErrorIs(t, err, ErrUnknownScheme)
}

func TestRegisterScheme(t *testing.T) {
	var got []string
	mem := NewMemory()
	RegisterScheme("TestScheme", func(spec string) (Registry, error) {
		got = append(got, spec)
		return mem, nil
	})
	RegisterScheme("testfail", func(spec string) (Registry, error) {
		return nil, errors.New("boom " + spec)
	})

	r, err := Open("testscheme://host:1/path")
	require.NoError(t, err)
	require.Same(t, mem, r)
	r, err = Open("TESTSCHEME:x")
	require.NoError(t, err)
	require.Same(t, mem, r)
	_, err = Open("testscheme")
	require.NoError(t, err)
	require.Equal(t, []string{"testscheme://host:1/path", "TESTSCHEME:x", "testscheme"}, got)

	_, err = Open("testfail:zzz")
	require.EqualError(t, err, "boom testfail:zzz")

	// Replacement.
	mem2 := NewMemory()
	RegisterScheme("testscheme", func(string) (Registry, error) { return mem2, nil })
	r, err = Open("testscheme:")
	require.NoError(t, err)
	require.Same(t, mem2, r)

	require.Panics(t, func() { RegisterScheme("", func(string) (Registry, error) { return nil, nil }) })
	require.Panics(t, func() { RegisterScheme("dir", func(string) (Registry, error) { return nil, nil }) })
	require.Panics(t, func() { RegisterScheme("mem", func(string) (Registry, error) { return nil, nil }) })
	require.Panics(t, func() { RegisterScheme("x", nil) })

	// Goroutine safety, checked by -race.
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			s := fmt.Sprintf("testconc%d", i)
			RegisterScheme(s, func(string) (Registry, error) { return mem, nil })
			_, _ = Open(s + ":")
			_, _ = Open("testscheme:")
		}()
	}
	for range 8 {
		<-done
	}
}
