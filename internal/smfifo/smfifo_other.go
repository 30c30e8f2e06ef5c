//go:build !linux

package smfifo

import "time"

// Watcher repairs this process's stuck shared-memory FIFOs on Linux;
// elsewhere it does nothing.
type Watcher struct{}

// New returns a Watcher that does nothing.
func New(string) *Watcher { return &Watcher{} }

// Tick does nothing.
func (w *Watcher) Tick(time.Time) {}

// NotePeerFailure does nothing.
func (w *Watcher) NotePeerFailure(time.Time) {}

// Repairs returns 0.
func (w *Watcher) Repairs() uint64 { return 0 }
