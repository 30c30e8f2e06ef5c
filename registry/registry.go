// Package registry is the name service of ucxnet.
//
// ucxnet has no socket listener: a UCX worker is reached through its packed
// worker address, an opaque byte string that only makes sense to another UCX
// worker. A [net.Listener] created by ucxnet therefore publishes an [Entry]
// holding its worker address under a name in a [Registry], and a dialer
// resolves that name to obtain the address it hands to UCX. The registry is
// the only rendezvous point between the two sides.
//
// Three backends are built in:
//
//   - [Dir] (spec "dir" or "dir:/path") keeps one JSON file per entry in a
//     private directory of mode 0700 (by default [DefaultDir]:
//     $XDG_RUNTIME_DIR/ucxnet, else ~/.cache/ucxnet; never a guessable
//     name in /tmp). It works across processes of one user on one host,
//     or across hosts sharing the directory, detects entries left behind
//     by processes that died, and serializes writers with flock(2).
//   - [Memory] (spec "mem:") is an in-process map, for tests and for
//     programs that dial themselves.
//   - [HTTP] (spec "http://host:port" or "https://...") talks to a registry
//     server ([Server], run by "ucxnet registry") shared by many hosts;
//     entries are leases that vanish when their publisher stops refreshing
//     them.
//
// Further backends (an etcd registry, ...) live in other
// modules and plug in through [RegisterScheme]; [Open] and [FromEnv] pick a
// backend from a spec string such as the UCXNET_REGISTRY environment
// variable.
package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Limits on what an [Entry] may hold.
const (
	// MaxNameLen is the longest valid name, in bytes.
	MaxNameLen = 255
	// MaxAddressLen is the longest packed worker address an Entry may hold,
	// in bytes.
	MaxAddressLen = 8192
	// MaxMetaBytes bounds Entry.Meta: the lengths of all its keys and
	// values together, in bytes.
	MaxMetaBytes = 4096
	// MaxMetaKeys bounds the number of keys in Entry.Meta.
	MaxMetaKeys = 64
	// MaxHostLen is the longest Entry.Host, in bytes.
	MaxHostLen = 255
)

// EnvRegistry names the environment variable read by [FromEnv]; its value is
// a spec for [Open].
const EnvRegistry = "UCXNET_REGISTRY"

// EnvRegistryDir names the environment variable that overrides the directory
// returned by [DefaultDir].
const EnvRegistryDir = "UCXNET_REGISTRY_DIR"

// ErrNotFound reports that no live entry has the requested name. Resolve
// also returns it, with "stale" or "corrupt" in the message, when the entry
// it found was left by a dead process or could not be decoded.
var ErrNotFound = errors.New("registry: name not found")

// ErrNameInUse reports that a live entry already holds the name being
// registered. Errors wrapping it also match [syscall.EADDRINUSE] under
// [errors.Is], so callers that treat the registry like a socket bind see the
// familiar "address already in use".
var ErrNameInUse error = nameInUseError{}

// ErrInvalidEntry reports an [Entry] that fails [Entry.Validate].
var ErrInvalidEntry = errors.New("registry: invalid entry")

// ErrInvalidName reports a name rejected by [ValidName].
var ErrInvalidName = errors.New("registry: invalid name")

// ErrUnsafeDir reports a registry directory that another user could tamper
// with: one not owned by the effective user, or writable by group or
// others.
var ErrUnsafeDir = errors.New("registry: unsafe directory")

// ErrUnknownScheme reports a spec passed to [Open] whose scheme is neither
// built in nor added with [RegisterScheme].
var ErrUnknownScheme = errors.New("registry: unknown scheme")

// nameInUseError is the type of ErrNameInUse; it matches EADDRINUSE.
type nameInUseError struct{}

// Error returns the error's text.
func (nameInUseError) Error() string { return "registry: name already in use" }

// Is makes errors.Is(err, syscall.EADDRINUSE) true for ErrNameInUse.
func (nameInUseError) Is(target error) bool { return target == syscall.EADDRINUSE }

// Entry is what a listener publishes.
type Entry struct {
	// Name is the instance name, unique within a registry.
	Name string `json:"name"`
	// Service is an optional service name shared by several instances;
	// Instances lists the entries of one service (the gRPC resolver uses
	// it).
	Service string `json:"service,omitempty"`
	// Address is the packed UCX worker address, opaque bytes.
	Address []byte `json:"address"`
	// PID is the process id of the publisher; 0 means unknown, and such an
	// entry is never considered stale.
	PID int `json:"pid"`
	// StartTime is the publisher's process start time (field 22 of
	// /proc/PID/stat), used to detect pid reuse; 0 means unknown.
	StartTime uint64 `json:"start_time,omitempty"`
	// Host is os.Hostname() of the publisher. Liveness is only checked for
	// entries published on the local host.
	Host string `json:"host"`
	// Meta holds free-form attributes.
	Meta map[string]string `json:"meta,omitempty"`
}

// Validate checks that e has a valid name (see [ValidName]), an address of 1
// to [MaxAddressLen] bytes, a non-negative PID, a Service of at most
// [MaxNameLen] bytes, a Host of at most [MaxHostLen] bytes and a Meta of at
// most [MaxMetaKeys] keys and [MaxMetaBytes] bytes (keys and values
// together). The error it returns wraps [ErrInvalidEntry] (and
// [ErrInvalidName] for a bad name).
func (e Entry) Validate() error {
	if err := ValidName(e.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEntry, err)
	}
	if len(e.Service) > MaxNameLen {
		return fmt.Errorf("%w: %q: service of %d bytes exceeds %d", ErrInvalidEntry, e.Name, len(e.Service), MaxNameLen)
	}
	if len(e.Host) > MaxHostLen {
		return fmt.Errorf("%w: %q: host of %d bytes exceeds %d", ErrInvalidEntry, e.Name, len(e.Host), MaxHostLen)
	}
	if len(e.Meta) > MaxMetaKeys {
		return fmt.Errorf("%w: %q: meta has %d keys, more than %d", ErrInvalidEntry, e.Name, len(e.Meta), MaxMetaKeys)
	}
	if n := metaBytes(e.Meta); n > MaxMetaBytes {
		return fmt.Errorf("%w: %q: meta of %d bytes exceeds %d", ErrInvalidEntry, e.Name, n, MaxMetaBytes)
	}
	if len(e.Address) == 0 {
		return fmt.Errorf("%w: %q: empty address", ErrInvalidEntry, e.Name)
	}
	if len(e.Address) > MaxAddressLen {
		return fmt.Errorf("%w: %q: address of %d bytes exceeds %d", ErrInvalidEntry, e.Name, len(e.Address), MaxAddressLen)
	}
	if e.PID < 0 {
		return fmt.Errorf("%w: %q: negative pid %d", ErrInvalidEntry, e.Name, e.PID)
	}
	return nil
}

// metaBytes is the length of m's keys and values together.
func metaBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

// clone returns a deep copy of e.
func (e Entry) clone() Entry {
	if e.Address != nil {
		e.Address = append([]byte(nil), e.Address...)
	}
	if e.Meta != nil {
		m := make(map[string]string, len(e.Meta))
		for k, v := range e.Meta {
			m[k] = v
		}
		e.Meta = m
	}
	return e
}

// Registry maps names to the entries published by listeners. All
// implementations are safe for concurrent use.
type Registry interface {
	// Register publishes e under e.Name. If a live entry of that name
	// exists it returns an error wrapping ErrNameInUse (which also matches
	// syscall.EADDRINUSE); a stale entry, whose process is dead, is
	// replaced. An invalid e yields an error wrapping ErrInvalidEntry.
	Register(ctx context.Context, e Entry) error
	// Unregister removes the entry named name if it is one this registry
	// value published (for Dir: one whose PID is this process). A missing
	// entry is not an error.
	Unregister(ctx context.Context, name string) error
	// Resolve returns the entry named name. A missing, corrupt or stale
	// entry (publisher on this host whose pid is gone or whose StartTime
	// differs) yields an error wrapping ErrNotFound; stale and corrupt
	// entries are removed, and the error text says "stale" or "corrupt"
	// and names the entry.
	Resolve(ctx context.Context, name string) (Entry, error)
	// Instances returns every live entry whose Service equals service,
	// sorted by Name; none gives an empty slice and a nil error. Stale
	// entries are skipped (and removed).
	Instances(ctx context.Context, service string) ([]Entry, error)
	// String names the backend, e.g. "dir:/run/user/0/ucxnet".
	String() string
}

// ValidName reports whether name may name an entry: 1 to [MaxNameLen]
// bytes of valid UTF-8 without NUL or other control characters. Any other
// character, '/' and ':' included, is allowed. The error wraps
// [ErrInvalidName].
func ValidName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name of %d bytes exceeds %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidName, name)
	}
	for i, r := range name {
		if r == 0 || unicode.IsControl(r) {
			return fmt.Errorf("%w: %q has control character %U at byte %d", ErrInvalidName, name, r, i)
		}
	}
	return nil
}

// UniqueName returns a fresh name of the form "ucx-<pid>-<12 hex digits>",
// for listeners that were not given one.
func UniqueName() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("ucx-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
}

var (
	hostname = sync.OnceValue(func() string {
		h, _ := os.Hostname()
		return h
	})
	selfStartTime = sync.OnceValue(func() uint64 {
		st, _ := procStartTime(os.Getpid())
		return st
	})
)

// CurrentProcess returns the values a publisher puts in Entry.PID,
// Entry.StartTime and Entry.Host: this process's id, its start time (0
// where it cannot be read) and the host name.
func CurrentProcess() (pid int, startTime uint64, host string) {
	return os.Getpid(), selfStartTime(), hostname()
}

// DefaultDir returns the directory used by the "dir" backend when no path is
// given, or "" if there is none (see [DefaultDirErr] for why):
//
//   - $UCXNET_REGISTRY_DIR if set;
//   - else $XDG_RUNTIME_DIR/ucxnet if XDG_RUNTIME_DIR is set and names a
//     real directory (not a link) owned by this user with mode 0700 or
//     stricter, as the XDG spec promises (systemd's /run/user/UID);
//   - else os.UserCacheDir()/ucxnet, usually ~/.cache/ucxnet (or
//     $XDG_CACHE_HOME/ucxnet).
//
// There is no fallback in a shared directory such as /tmp: another user
// could create /tmp/ucxnet-UID first (squatting the name, or pointing it
// elsewhere with a link). Processes of one user meet only if they agree on
// the directory: a login session (XDG_RUNTIME_DIR set) and a cron job or
// "su" shell (unset) of the same user use different directories unless
// UCXNET_REGISTRY or UCXNET_REGISTRY_DIR names one for both.
func DefaultDir() string {
	d, _ := DefaultDirErr()
	return d
}

// DefaultDirErr is [DefaultDir] with the reason there is no default
// directory: neither XDG_RUNTIME_DIR nor a home or cache directory is
// usable. The error names the way out (UCXNET_REGISTRY=dir:/path).
func DefaultDirErr() (string, error) {
	if d := os.Getenv(EnvRegistryDir); d != "" {
		return d, nil
	}
	var why []string
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		if err := runtimeDirOK(x); err == nil {
			return filepath.Join(x, "ucxnet"), nil
		} else {
			why = append(why, err.Error())
		}
	} else {
		why = append(why, "XDG_RUNTIME_DIR is not set")
	}
	c, err := os.UserCacheDir()
	if err == nil && filepath.IsAbs(c) {
		return filepath.Join(c, "ucxnet"), nil
	}
	if err == nil {
		err = fmt.Errorf("cache directory %q is not absolute", c)
	}
	why = append(why, "no user cache directory: "+err.Error())
	return "", fmt.Errorf("registry: no default registry directory (%s); set %s=dir:/path to a directory of your own with mode 0700 (or %s=/path)",
		strings.Join(why, "; "), EnvRegistry, EnvRegistryDir)
}

// runtimeDirOK checks that x is fit to hold the registry: a real directory
// owned by this user and closed to group and others.
func runtimeDirOK(x string) error {
	fi, err := os.Lstat(x)
	if err != nil {
		return fmt.Errorf("XDG_RUNTIME_DIR=%s: %w", x, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("XDG_RUNTIME_DIR=%s is not a directory (mode %s)", x, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("XDG_RUNTIME_DIR=%s is owned by uid %d, not %d", x, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("XDG_RUNTIME_DIR=%s has mode %#o, not 0700", x, fi.Mode().Perm())
	}
	return nil
}

// openDefaultDir is NewDir(DefaultDir()), with errors that say the
// directory was the default one and how to choose another.
func openDefaultDir() (Registry, error) {
	d, err := DefaultDirErr()
	if err != nil {
		return nil, err
	}
	r, err := NewDir(d)
	if err != nil {
		return nil, fmt.Errorf("default registry directory unusable: %w (or set %s=dir:/path)", err, EnvRegistry)
	}
	return r, nil
}

var (
	schemesMu sync.RWMutex
	schemes   = map[string]func(spec string) (Registry, error){}

	memMu     sync.Mutex
	memShared = map[string]*Memory{}
)

// builtinScheme reports whether scheme is handled by Open itself.
func builtinScheme(scheme string) bool {
	switch scheme {
	case "dir", "mem", "memory", "http", "https":
		return true
	}
	return false
}

// RegisterScheme makes Open hand specs of the form "scheme:..." (or the bare
// "scheme") to open, which receives the whole spec. Schemes are
// case-insensitive; registering a scheme again replaces the earlier
// function. It is safe for concurrent use. It panics if scheme is empty or
// one of the built-in schemes "dir", "mem", "memory", "http" and "https",
// or if open is nil.
func RegisterScheme(scheme string, open func(spec string) (Registry, error)) {
	s := strings.ToLower(scheme)
	if s == "" || strings.ContainsAny(s, ":/") {
		panic(fmt.Sprintf("registry: RegisterScheme: invalid scheme %q", scheme))
	}
	if builtinScheme(s) {
		panic(fmt.Sprintf("registry: RegisterScheme: scheme %q is built in", scheme))
	}
	if open == nil {
		panic(fmt.Sprintf("registry: RegisterScheme: nil open function for scheme %q", scheme))
	}
	schemesMu.Lock()
	schemes[s] = open
	schemesMu.Unlock()
}

// Open returns the registry described by spec:
//
//   - "" or "dir": NewDir(DefaultDir()); an error if there is no default
//     directory or it is unsafe, saying so and naming the way out;
//   - "dir:/path" (also "dir:///path"): NewDir("/path");
//   - a spec starting with "/" is taken as "dir:" followed by it;
//   - "mem:" or "memory:" (also "mem", "memory"): a process-wide shared
//     Memory, the same instance on every call; "mem:NAME" is a separate
//     process-wide Memory per NAME;
//   - "http://host:port" or "https://host:port" (optionally with a path
//     prefix): NewHTTP(spec, $UCXNET_REGISTRY_TOKEN), with the lease TTL
//     from $UCXNET_REGISTRY_TTL (a duration, e.g. "500ms") if set;
//   - any other "scheme:..." or bare "scheme": the function given to
//     RegisterScheme for that scheme, called with the whole spec.
//
// An unregistered scheme gives an error wrapping ErrUnknownScheme.
func Open(spec string) (Registry, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return openDefaultDir()
	}
	if strings.HasPrefix(spec, "/") {
		return NewDir(spec)
	}
	scheme, rest, hasColon := strings.Cut(spec, ":")
	scheme = strings.ToLower(scheme)
	switch scheme {
	case "dir":
		if strings.HasPrefix(rest, "///") {
			rest = rest[2:]
		}
		if rest == "" {
			return openDefaultDir()
		}
		return NewDir(rest)
	case "mem", "memory":
		memMu.Lock()
		defer memMu.Unlock()
		m := memShared[rest]
		if m == nil {
			m = NewMemory()
			m.name = "mem:" + rest
			memShared[rest] = m
		}
		return m, nil
	case "http", "https":
		return openHTTP(spec)
	}
	schemesMu.RLock()
	open := schemes[scheme]
	schemesMu.RUnlock()
	if open == nil {
		if !hasColon {
			return nil, fmt.Errorf("%w: %q (want \"dir:/path\", \"mem:\", \"http://host:port\" or a registered scheme)", ErrUnknownScheme, spec)
		}
		return nil, fmt.Errorf("%w: %q in spec %q", ErrUnknownScheme, scheme, spec)
	}
	return open(spec)
}

// FromEnv opens the registry named by the UCXNET_REGISTRY environment
// variable: Open(os.Getenv("UCXNET_REGISTRY")).
func FromEnv() (Registry, error) {
	return Open(os.Getenv(EnvRegistry))
}

// The three built-in backends implement Registry, and io.Closer so that
// whoever owns one (e.g. a Transport, by type assertion) can release it.
var (
	_ Registry  = (*Dir)(nil)
	_ Registry  = (*Memory)(nil)
	_ Registry  = (*HTTP)(nil)
	_ io.Closer = (*Dir)(nil)
	_ io.Closer = (*Memory)(nil)
	_ io.Closer = (*HTTP)(nil)
)
