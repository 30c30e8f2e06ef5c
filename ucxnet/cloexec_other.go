//go:build !linux

package ucxnet

import "time"

// cloexecSweeper marks UCX's descriptors close-on-exec on Linux
// (cloexec_linux.go); elsewhere it does nothing.
type cloexecSweeper struct{}

var fdSweep = &cloexecSweeper{}

func (s *cloexecSweeper) request() {}

func (s *cloexecSweeper) tick(time.Time) {}

func (s *cloexecSweeper) markedCount() uint64 { return 0 }
