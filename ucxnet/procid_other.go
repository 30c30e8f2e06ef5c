//go:build !linux

package ucxnet

import "github.com/ucxnet/ucxnet/internal/stream"

// selfProc returns this process's identity for its Hellos: none off Linux.
var selfProc = func() stream.ProcID { return stream.ProcID{} }

// keepStopped reports false: off Linux a stopped peer cannot be told from
// a dead one (procid_linux.go).
func (t *Transport) keepStopped(*peer, int64) bool { return false }
