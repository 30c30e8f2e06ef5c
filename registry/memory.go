package registry

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Memory is an in-process [Registry], safe for concurrent use. Its entries
// live until they are unregistered: it does no liveness checks, so nothing
// it holds is ever stale. Entries are copied on the way in and out.
//
// Use [NewMemory] for a private instance, or Open("mem:") for the one shared
// by the whole process.
type Memory struct {
	name    string
	mu      sync.Mutex
	entries map[string]Entry
}

// NewMemory returns an empty private in-process registry.
func NewMemory() *Memory {
	return &Memory{name: "mem", entries: map[string]Entry{}}
}

// Register publishes e under e.Name; a name already present gives an error
// wrapping [ErrNameInUse].
func (m *Memory) Register(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.entries[e.Name]; ok {
		return fmt.Errorf("%w: %q is registered by pid %d on %q (%s)", ErrNameInUse, e.Name, old.PID, old.Host, m)
	}
	m.entries[e.Name] = e.clone()
	return nil
}

// Unregister removes the entry named name; a missing name is not an error.
func (m *Memory) Unregister(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.entries, name)
	m.mu.Unlock()
	return nil
}

// Resolve returns a copy of the entry named name, or an error wrapping
// [ErrNotFound].
func (m *Memory) Resolve(ctx context.Context, name string) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	m.mu.Lock()
	e, ok := m.entries[name]
	m.mu.Unlock()
	if !ok {
		return Entry{}, fmt.Errorf("%w: %q (%s)", ErrNotFound, name, m)
	}
	return e.clone(), nil
}

// Instances returns copies of the entries whose Service equals service,
// sorted by Name.
func (m *Memory) Instances(ctx context.Context, service string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []Entry{}
	m.mu.Lock()
	for _, e := range m.entries {
		if e.Service == service {
			out = append(out, e.clone())
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// String returns "mem" for a private instance and "mem:" (or "mem:NAME")
// for one obtained from [Open].
func (m *Memory) String() string { return m.name }

// Close returns nil: a Memory holds no descriptor or goroutine, and its
// entries stay (another value returned by Open("mem:") may share them).
// It exists so that every built-in backend is an [io.Closer].
func (m *Memory) Close() error { return nil }
