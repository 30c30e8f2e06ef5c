package session

import (
	"github.com/ucxnet/ucxnet/internal/procstat"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// selfProc returns this process's identity for its Hellos
// (stream.ProcID): information for the peer, which decides nothing by it
// (what a peer is comes from the kernel channel, kchan.go).
func selfProc() stream.ProcID { return procstat.Self() }
