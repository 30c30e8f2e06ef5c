package session

// Snapshots of whole transports: what the stats socket serves, what
// `ucxnet ls` prints and what expvar publishes.

import (
	"expvar"
	"fmt"
	"slices"
	"sync"
)

// Snapshot is the state of one transport: its counters, listeners and
// conns. Its fields and JSON tags mean what ucxnet.Snapshot's do: ucxnet
// copies one into the other field by field, so the two have the same
// fields in the same order.
type Snapshot struct {
	PID          int         `json:"pid"`
	Program      string      `json:"program"`
	Transport    string      `json:"transport"`
	Listeners    []string    `json:"listeners"`
	Stats        Stats       `json:"stats"`
	Lane         LaneStats   `json:"lane"`
	Conns        []ConnStats `json:"conns"`
	ConnsOmitted int         `json:"conns_omitted,omitempty"`
}

// MaxSnapshotConns bounds the conns a Snapshot lists.
const MaxSnapshotConns = 10000

// live is the set of the process's open transports, for PublishExpvar.
var live struct {
	mu sync.Mutex
	ts map[*Transport]struct{}
}

func addLive(t *Transport) {
	live.mu.Lock()
	if live.ts == nil {
		live.ts = map[*Transport]struct{}{}
	}
	live.ts[t] = struct{}{}
	live.mu.Unlock()
}

func removeLive(t *Transport) {
	live.mu.Lock()
	delete(live.ts, t)
	live.mu.Unlock()
}

// Snapshots returns a Snapshot of every open transport of the process,
// sorted by transport name.
func Snapshots() []Snapshot {
	live.mu.Lock()
	ts := make([]*Transport, 0, len(live.ts))
	for t := range live.ts {
		ts = append(ts, t)
	}
	live.mu.Unlock()
	out := make([]Snapshot, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Snapshot())
	}
	slices.SortFunc(out, func(a, b Snapshot) int {
		switch {
		case a.Transport < b.Transport:
			return -1
		case a.Transport > b.Transport:
			return 1
		}
		return 0
	})
	return out
}

// ExpvarName is the expvar variable PublishExpvar publishes.
const ExpvarName = "ucxnet"

var expvarMu sync.Mutex

// PublishExpvar publishes Snapshots() as the expvar variable "ucxnet"
// (served by expvar's /debug/vars handler): every open transport of the
// process with its counters, listeners and conns, computed when read.
// Calling it again does nothing; it returns an error, and publishes
// nothing, if another package already published a variable of that name.
func PublishExpvar() error { return publishExpvarAs(ExpvarName) }

// publishExpvarAs is PublishExpvar under name.
func publishExpvarAs(name string) error {
	expvarMu.Lock()
	defer expvarMu.Unlock()
	if v := expvar.Get(name); v != nil {
		if _, ours := v.(snapshotsVar); ours {
			return nil
		}
		return fmt.Errorf("ucxnet: expvar %q is already published by another package", name)
	}
	expvar.Publish(name, snapshotsVar{})
	return nil
}

// snapshotsVar is the expvar.Var of PublishExpvar.
type snapshotsVar struct{}

// String returns Snapshots() as JSON.
func (snapshotsVar) String() string { return expvar.Func(func() any { return Snapshots() }).String() }
