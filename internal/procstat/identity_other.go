//go:build !linux

package procstat

import "github.com/ucxnet/ucxnet/internal/stream"

// Self returns this process's identity: none off Linux.
func Self() stream.ProcID { return stream.ProcID{} }
