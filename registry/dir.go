package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	entrySuffix = ".entry"
	lockName    = ".lock"
	tmpPattern  = ".tmp-*"
	// maxFileName is the longest file name most file systems accept.
	maxFileName = 255
	// maxEntryFile bounds the size of an entry file; larger files are
	// corrupt.
	maxEntryFile = 1 << 20
)

// Dir is a [Registry] kept in a directory, one JSON file per entry, shared
// by every process that can read the directory. It is safe for concurrent
// use, also by several processes and by several Dir values on one path.
//
// Entry files are named after the escaped entry name with the suffix
// ".entry" and have mode 0600. They are written atomically (temporary file,
// then link(2) or rename(2)), and Register and Unregister are serialized
// across processes by flock(2) on the file ".lock" in the directory.
//
// An entry published on this host (Entry.Host equal to os.Hostname()) is
// stale once its process is gone: kill(pid, 0) fails with ESRCH, or, on
// Linux, Entry.StartTime is set and differs from the start time in
// /proc/PID/stat (the pid was reused). Entries from other hosts are assumed
// live. Stale entries are replaced by Register and removed by Resolve and
// Instances.
//
// A Dir holds its directory open from NewDir on, and every file operation
// is relative to that descriptor, never to the path: a directory renamed
// or replaced afterwards (by whoever may write its parent) is not
// followed, and the Dir keeps using the directory it checked.
type Dir struct {
	path string
	dir  *os.File // the directory openCheckedDir judged; nil only in tests of judge
	host string
	pid  int
}

// NewDir returns the registry kept in directory path. A missing directory
// is created (parents with mode 0700, as needed) with mode 0700, which is
// set explicitly whatever the umask. An existing one must be a real
// directory, not a symbolic link (the last path element is never
// followed), owned by the effective user and not writable by group or
// others; otherwise NewDir fails with an error wrapping [ErrUnsafeDir]
// that says what is wrong and how to choose another directory. An
// existing directory that passes but that group or others may read or
// search (e.g. 0755) is tightened to 0700, so that the registry directory
// is always mode 0700 once NewDir returns.
func NewDir(path string) (*Dir, error) {
	if path == "" {
		return nil, fmt.Errorf("registry: empty directory path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if err := makeDir(abs); err != nil {
		return nil, err
	}
	dir, err := openCheckedDir(abs)
	if err != nil {
		return nil, err
	}
	return &Dir{path: abs, dir: dir, host: hostname(), pid: os.Getpid()}, nil
}

// makeDir creates path with mode 0700 if nothing is there (not even a
// dangling symbolic link), and then sets that mode, as the umask may have
// dropped owner bits. It leaves an existing path alone for openCheckedDir.
func makeDir(path string) error {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // exists (openCheckedDir judges it), or unreadable (openCheckedDir says why)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("registry: creating directory: %w", err)
	}
	err := os.Mkdir(path, 0o700)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil // created meanwhile by someone: openCheckedDir judges it
	case err != nil:
		return fmt.Errorf("registry: creating directory: %w", err)
	}
	// We created it. Set the mode through an O_NOFOLLOW descriptor, so
	// that a link put in its place meanwhile is not followed.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("registry: opening new directory %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return fmt.Errorf("registry: chmod 0700 %s: %w", path, err)
	}
	return nil
}

// dirAdvice is appended to ErrUnsafeDir errors: the ways out.
const dirAdvice = "; use a directory of your own with mode 0700, e.g. " + EnvRegistry + "=dir:/path"

// openCheckedDir verifies that path is a directory safe to keep entries
// in: not a symbolic link, owned by the effective user, not writable by
// group or others; it sets mode 0700 if group or others have other bits.
// It opens path with O_NOFOLLOW|O_DIRECTORY, inspects what it opened, so
// a link is never followed, and returns that open directory, for the
// caller to work in.
func openCheckedDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		lfi, lerr := os.Lstat(path)
		switch {
		case lerr == nil && lfi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			owner := ""
			if st, ok := lfi.Sys().(*syscall.Stat_t); ok {
				owner = fmt.Sprintf(" owned by uid %d", st.Uid)
			}
			return nil, fmt.Errorf("%w: %s is a symbolic link%s (to %q); the registry directory must be a real directory, links are not followed%s", ErrUnsafeDir, path, owner, target, dirAdvice)
		case lerr == nil && !lfi.IsDir():
			return nil, fmt.Errorf("%w: %s is not a directory (mode %s)%s", ErrUnsafeDir, path, lfi.Mode(), dirAdvice)
		}
		return nil, fmt.Errorf("registry: opening directory %s: %w", path, err)
	}
	dir := os.NewFile(uintptr(fd), path)
	if err := judgeDir(fd, path); err != nil {
		dir.Close()
		return nil, err
	}
	return dir, nil
}

// judgeDir is openCheckedDir's verdict on the directory open as fd.
func judgeDir(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("registry: stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: %s is not a directory%s", ErrUnsafeDir, path, dirAdvice)
	}
	euid := os.Geteuid()
	perm := os.FileMode(st.Mode & 0o777)
	if int(st.Uid) != euid {
		return fmt.Errorf("%w: %s is owned by uid %d, not by this process's euid %d (mode %#o): another user may have created it to squat or spy on the registry%s", ErrUnsafeDir, path, st.Uid, euid, perm, dirAdvice)
	}
	if perm&0o022 != 0 {
		// Others may have planted or replaced entries already: refuse
		// rather than tighten.
		return fmt.Errorf("%w: %s (owner uid %d) has mode %#o, writable by group or others; run \"chmod 700 %s\" if its contents can be trusted%s", ErrUnsafeDir, path, st.Uid, perm, path, dirAdvice)
	}
	if perm&0o077 != 0 {
		// Ours, readable but not writable by others (mkdir's usual 0755):
		// nobody else can have changed it, so close it to them.
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return fmt.Errorf("%w: %s has mode %#o, readable by group or others, and chmod 0700 failed: %v%s", ErrUnsafeDir, path, perm, err, dirAdvice)
		}
	}
	return nil
}

// Close does nothing and returns nil: it exists so that every built-in
// backend is an [io.Closer], and d stays usable. A Dir holds one
// descriptor, of its directory, released when the Dir is garbage
// collected, and no goroutine.
func (d *Dir) Close() error { return nil }

// Path returns the directory d keeps its entries in.
func (d *Dir) Path() string { return d.path }

// String returns "dir:" followed by the directory path.
func (d *Dir) String() string { return "dir:" + d.path }

// entryFileName maps a valid name to the base name of its entry file. Bytes
// other than [A-Za-z0-9_.-], and a leading '.', are written as %XX, so the
// mapping is injective and no entry file starts with '.' (the lock and
// temporary files do). A name whose escaped form would make the file name
// longer than 255 bytes is replaced by '~' and the hex SHA-256 of the name;
// '~' never appears in escaped names. The real name is always in the JSON.
func entryFileName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		plain := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.' && i > 0
		if plain {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if len(s)+len(entrySuffix) > maxFileName {
		sum := sha256.Sum256([]byte(name))
		s = "~" + hex.EncodeToString(sum[:])
	}
	return s + entrySuffix
}

// verdict classifies an entry file.
type verdict int

const (
	live verdict = iota
	missing
	corrupt
	stale
)

// loaded is the outcome of reading one entry file.
type loaded struct {
	entry  Entry
	v      verdict
	reason string // why the entry is corrupt or stale
}

// load reads and judges the entry file base. It returns an error only for
// failures that say nothing about the file's contents (e.g. EMFILE), so that
// a good entry is never removed because of them.
func (d *Dir) load(base string) (loaded, error) {
	f, err := d.openAt(base, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return loaded{v: missing}, nil
	case errors.Is(err, syscall.ELOOP):
		return loaded{v: corrupt, reason: "is a symbolic link"}, nil
	case err != nil:
		return loaded{}, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return loaded{}, fmt.Errorf("registry: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return loaded{v: corrupt, reason: "not a regular file"}, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEntryFile+1))
	if err != nil {
		return loaded{}, fmt.Errorf("registry: reading %s: %w", f.Name(), err)
	}
	return d.judge(base, data), nil
}

// judge decodes the contents of entry file base and checks liveness.
func (d *Dir) judge(base string, data []byte) loaded {
	if len(data) > maxEntryFile {
		return loaded{v: corrupt, reason: fmt.Sprintf("file larger than %d bytes", maxEntryFile)}
	}
	var e Entry
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&e); err != nil {
		return loaded{v: corrupt, reason: "bad JSON: " + err.Error()}
	}
	if dec.More() {
		return loaded{v: corrupt, reason: "trailing data after JSON"}
	}
	if err := e.Validate(); err != nil {
		return loaded{v: corrupt, reason: err.Error()}
	}
	if entryFileName(e.Name) != base {
		return loaded{v: corrupt, reason: fmt.Sprintf("holds name %q", e.Name)}
	}
	if ok, why := d.alive(e); !ok {
		return loaded{entry: e, v: stale, reason: why}
	}
	return loaded{entry: e, v: live}
}

// alive reports whether the publisher of e may still be running, and if not
// why.
func (d *Dir) alive(e Entry) (bool, string) {
	if e.Host != d.host || e.PID <= 0 {
		return true, ""
	}
	if err := unix.Kill(e.PID, 0); errors.Is(err, unix.ESRCH) {
		return false, fmt.Sprintf("publisher pid %d on %s is gone", e.PID, e.Host)
	}
	if procZombie(e.PID) {
		return false, fmt.Sprintf("publisher pid %d on %s has exited (zombie)", e.PID, e.Host)
	}
	if e.StartTime == 0 {
		return true, ""
	}
	st, err := procStartTime(e.PID)
	switch {
	case err == nil && st != e.StartTime:
		return false, fmt.Sprintf("pid %d was reused (start time %d, entry has %d)", e.PID, st, e.StartTime)
	case errors.Is(err, fs.ErrNotExist) && procMounted():
		return false, fmt.Sprintf("publisher pid %d on %s is gone", e.PID, e.Host)
	}
	return true, ""
}

// lock takes the cross-process lock on d, polling so that ctx can cancel
// the wait. The returned function releases it.
func (d *Dir) lock(ctx context.Context) (func(), error) {
	f, err := d.openAt(lockName, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		return nil, fmt.Errorf("registry: opening lock: %w", err)
	}
	fd := int(f.Fd())
	wait := 50 * time.Microsecond
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing releases the lock
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("registry: flock %s: %w", f.Name(), err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
		if wait < 10*time.Millisecond {
			wait *= 2
		}
	}
}

// Register publishes e as the file of e.Name. A live entry of that name
// gives an error wrapping [ErrNameInUse]; a stale or corrupt one is
// replaced.
func (d *Dir) Register(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidEntry, e.Name, err)
	}
	if len(data) > maxEntryFile {
		return fmt.Errorf("%w: %q: encoded entry of %d bytes exceeds %d", ErrInvalidEntry, e.Name, len(data), maxEntryFile)
	}
	data = append(data, '\n')

	unlock, err := d.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	tmp, err := d.writeTemp(data)
	if err != nil {
		return err
	}
	defer d.removeAt(tmp)

	base := entryFileName(e.Name)
	err = d.linkAt(tmp, base)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		// No hard links here (some file systems); the lock still makes
		// check-then-rename safe against cooperating processes.
		// Otherwise (the name exists) go on as after a failed link.
		if serr := d.lstatAt(base); errors.Is(serr, fs.ErrNotExist) {
			if rerr := d.renameAt(tmp, base); rerr != nil {
				return fmt.Errorf("registry: publishing %q: %w", e.Name, rerr)
			}
			return nil
		}
	}
	old, lerr := d.load(base)
	if lerr != nil {
		return lerr
	}
	if old.v == live {
		return fmt.Errorf("%w: %q is registered by pid %d on %q (%s)", ErrNameInUse, e.Name, old.entry.PID, old.entry.Host, d)
	}
	// Stale, corrupt, or removed meanwhile by a process ignoring the lock:
	// replace atomically.
	if err := d.renameAt(tmp, base); err != nil {
		return fmt.Errorf("registry: publishing %q: %w", e.Name, err)
	}
	return nil
}

// Unregister removes the entry named name if this process published it
// (its PID is this process's and its Host this host). A missing entry, or
// one of another process, is left alone and gives nil.
func (d *Dir) Unregister(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ValidName(name) != nil {
		return nil // no such entry can exist
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	base := entryFileName(name)
	l, err := d.load(base)
	if err != nil {
		return err
	}
	if l.v != live && l.v != stale {
		return nil
	}
	if l.entry.PID != d.pid || l.entry.Host != d.host {
		return nil
	}
	if err := d.removeAt(base); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("registry: unregistering %q: %w", name, err)
	}
	return nil
}

// Resolve returns the entry named name. Missing, corrupt and stale entries
// give an error wrapping [ErrNotFound]; corrupt and stale files are removed.
func (d *Dir) Resolve(ctx context.Context, name string) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	if err := ValidName(name); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	base := entryFileName(name)
	l, err := d.load(base)
	if err != nil {
		return Entry{}, err
	}
	if l.v == corrupt || l.v == stale {
		// Re-judge under the lock, so as not to remove an entry that
		// replaced the bad one meanwhile.
		l, err = d.removeBad(ctx, base)
		if err != nil {
			return Entry{}, err
		}
	}
	switch l.v {
	case live:
		return l.entry, nil
	case missing:
		return Entry{}, fmt.Errorf("%w: %q (%s)", ErrNotFound, name, d)
	case stale:
		return Entry{}, fmt.Errorf("%w: %q: stale entry removed: %s (%s)", ErrNotFound, name, l.reason, d)
	default:
		return Entry{}, fmt.Errorf("%w: %q: corrupt entry removed: %s (%s)", ErrNotFound, name, l.reason, d)
	}
}

// removeBad re-reads entry file base under the lock and removes it if it is
// still corrupt or stale; it returns what it found.
func (d *Dir) removeBad(ctx context.Context, base string) (loaded, error) {
	unlock, err := d.lock(ctx)
	if err != nil {
		return loaded{}, err
	}
	defer unlock()
	return d.removeBadLocked(base)
}

func (d *Dir) removeBadLocked(base string) (loaded, error) {
	l, err := d.load(base)
	if err != nil {
		return l, err
	}
	if l.v == corrupt || l.v == stale {
		if err := d.removeAt(base); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return l, fmt.Errorf("registry: removing %s entry %s: %w", verdictName(l.v), base, err)
		}
	}
	return l, nil
}

func verdictName(v verdict) string {
	switch v {
	case live:
		return "live"
	case missing:
		return "missing"
	case corrupt:
		return "corrupt"
	default:
		return "stale"
	}
}

// entryFiles lists the names of the entry files: those ending in
// ".entry" and not starting with '.'.
func (d *Dir) entryFiles(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	des, err := d.readDir()
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	var bases []string
	for _, de := range des {
		if base := de.Name(); !strings.HasPrefix(base, ".") && strings.HasSuffix(base, entrySuffix) {
			bases = append(bases, base)
		}
	}
	return bases, nil
}

// Instances returns the live entries whose Service equals service, sorted by
// Name. Stale and corrupt entry files are removed; files not ending in
// ".entry", and those starting with '.', are ignored.
func (d *Dir) Instances(ctx context.Context, service string) ([]Entry, error) {
	bases, err := d.entryFiles(ctx)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	var bad []string
	for _, base := range bases {
		l, err := d.load(base)
		if err != nil {
			return nil, err
		}
		switch l.v {
		case live:
			if l.entry.Service == service {
				out = append(out, l.entry)
			}
		case corrupt, stale:
			bad = append(bad, base)
		}
	}
	if len(bad) > 0 {
		unlock, err := d.lock(ctx)
		if err != nil {
			return nil, err
		}
		for _, base := range bad {
			l, err := d.removeBadLocked(base)
			if err != nil {
				unlock()
				return nil, err
			}
			if l.v == live && l.entry.Service == service {
				out = append(out, l.entry)
			}
		}
		unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
