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
//     private directory (by default [DefaultDir], usually
//     $XDG_RUNTIME_DIR/ucxnet). It works across processes on one host, or
//     across hosts sharing the directory, detects entries left behind by
//     processes that died, and serializes writers with flock(2).
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
// to [MaxAddressLen] bytes and a non-negative PID. The error it returns wraps
// [ErrInvalidEntry] (and [ErrInvalidName] for a bad name).
func (e Entry) Validate() error {
	if err := ValidName(e.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEntry, err)
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
// given: $UCXNET_REGISTRY_DIR if set; else $XDG_RUNTIME_DIR/ucxnet if
// XDG_RUNTIME_DIR is set and is an existing directory; else
// os.TempDir()/ucxnet-<euid>.
func DefaultDir() string {
	if d := os.Getenv(EnvRegistryDir); d != "" {
		return d
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		if fi, err := os.Stat(x); err == nil && fi.IsDir() {
			return filepath.Join(x, "ucxnet")
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ucxnet-%d", os.Geteuid()))
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
//   - "" or "dir": NewDir(DefaultDir());
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
		return NewDir(DefaultDir())
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
			return NewDir(DefaultDir())
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

// Both built-in backends implement Registry.
var (
	_ Registry = (*Dir)(nil)
	_ Registry = (*Memory)(nil)
)
