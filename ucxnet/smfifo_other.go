//go:build !linux

package ucxnet

import "time"

// smWatcher repairs UCX shared-memory FIFOs left stuck by a dead sender
// (see smfifo_linux.go); elsewhere it does nothing.
type smWatcher struct{ repaired uint64 }

var smWatch = &smWatcher{}

func (w *smWatcher) tick(time.Time) {}

func (w *smWatcher) notePeerFailure(time.Time) {}

func (w *smWatcher) repairs() uint64 { return w.repaired }

func (w *smWatcher) noteStoppedPeer(time.Time) {}
