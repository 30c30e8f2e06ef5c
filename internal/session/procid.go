package session

import "github.com/ucxnet/ucxnet/internal/procstat"

// selfProc returns this process's identity for its Hellos
// (stream.ProcID). A variable, so that a test's child process can hide
// it.
var selfProc = procstat.Self
