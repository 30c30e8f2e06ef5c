// Package cucx is ucxnet's cgo binding to UCP, the protocol layer of UCX.
//
// It is deliberately thin and knows nothing of conns or streams: it opens a
// UCP context and one worker (thread mode SERIALIZED, features AM and
// WAKEUP), creates and closes endpoints, sends eager active-message frames
// and drains what UCX reports. Every callback UCX makes lands in C
// (glue.c), which records it in a C-owned event array; Go reads that array
// once per progress batch, so there is no C→Go callback per frame.
//
// Memory rules: Send and SendFrames never leave UCX a pointer into Go
// memory: a small send (≤ 1 KiB) is first offered to UCX straight from the
// caller's memory with UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, which either
// completes before the call returns or is refused; otherwise header and
// payload are copied into a C-owned buffer that the operation owns until
// UCX completes it. SendFramesZC is the one exception: UCX reads the
// payload from the caller's memory until an EventSent says it is done, and
// the caller keeps that memory pinned and unchanged until then. Received
// data stays in UCX descriptors (or pooled C copies) that are valid until
// the next Progress or Arm call, unless held (Event.Hold).
//
// A Worker is not safe for concurrent use: the caller (package progress)
// serializes every method except Signal and EventFD.
//
// Built without cgo or off Linux (stub.go), every entry point that needs
// UCX returns an error wrapping ErrUnsupported; the pure-Go parts
// (ValidateAddress, Transports, Status and Error) work everywhere.
package cucx

// The parts of package cucx that need neither cgo nor UCX: shared by the
// real binding (cucx.go, linux with cgo) and the stub (stub.go, elsewhere).

import (
	"errors"

	"fmt"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
	"strings"
	"syscall"
)

// ErrUnsupported is returned (wrapped) by every entry point that needs UCX
// when ucxnet was built without cgo or on a system other than Linux.
var ErrUnsupported = errors.New("ucxnet: built without cgo/UCX support")

// Status is a UCX status code (ucs_status_t).
type Status int

// UCX status codes (ucs_status_t of UCX 1.13, src/ucs/type/status.h). The
// cgo build checks at compile time that these equal UCX's.
const (
	StatusOK                 Status = 0
	StatusInProgress         Status = 1
	StatusNoMessage          Status = -1
	StatusNoResource         Status = -2
	StatusIOError            Status = -3
	StatusNoMemory           Status = -4
	StatusInvalidParam       Status = -5
	StatusUnreachable        Status = -6
	StatusInvalidAddr        Status = -7
	StatusNotImplemented     Status = -8
	StatusMessageTruncated   Status = -9
	StatusNoProgress         Status = -10
	StatusBufferTooSmall     Status = -11
	StatusNoElem             Status = -12
	StatusSomeConnectsFailed Status = -13
	StatusNoDevice           Status = -14
	StatusBusy               Status = -15
	StatusCanceled           Status = -16
	StatusShmemSegment       Status = -17
	StatusAlreadyExists      Status = -18
	StatusOutOfRange         Status = -19
	StatusTimedOutOp         Status = -20 // UCS_ERR_TIMED_OUT: an operation's own timeout
	StatusExceedsLimit       Status = -21
	StatusUnsupported        Status = -22
	StatusRejected           Status = -23
	StatusNotConnected       Status = -24
	StatusConnReset          Status = -25
	StatusTimedOut           Status = -80 // UCS_ERR_ENDPOINT_TIMEOUT: the peer stopped answering

	statusFirstLinkFailure     Status = -40
	statusLastLinkFailure      Status = -59
	statusFirstEndpointFailure Status = -60
	statusLastEndpointFailure  Status = -89
)

// statusText is ucs_status_string's text for each code (UCX 1.13.1).
var statusText = map[Status]string{
	StatusOK:                 "Success",
	StatusInProgress:         "Operation in progress",
	StatusNoMessage:          "No pending message",
	StatusNoResource:         "No resources are available to initiate the operation",
	StatusIOError:            "Input/output error",
	StatusNoMemory:           "Out of memory",
	StatusInvalidParam:       "Invalid parameter",
	StatusUnreachable:        "Destination is unreachable",
	StatusInvalidAddr:        "Address not valid",
	StatusNotImplemented:     "Function not implemented",
	StatusMessageTruncated:   "Message truncated",
	StatusNoProgress:         "No progress",
	StatusBufferTooSmall:     "Provided buffer is too small",
	StatusNoElem:             "No such element",
	StatusSomeConnectsFailed: "Failed to connect some of the requested endpoints",
	StatusNoDevice:           "No such device",
	StatusBusy:               "Device is busy",
	StatusCanceled:           "Request canceled",
	StatusShmemSegment:       "Shared memory error",
	StatusAlreadyExists:      "Element already exists",
	StatusOutOfRange:         "Index out of range",
	StatusTimedOutOp:         "Operation timed out",
	StatusExceedsLimit:       "User-defined limit was reached",
	StatusUnsupported:        "Unsupported operation",
	StatusRejected:           "Operation rejected by remote peer",
	StatusNotConnected:       "Endpoint is not connected",
	StatusConnReset:          "Connection reset by remote peer",
	StatusTimedOut:           "Endpoint timeout",
}

// StatusString returns UCX's text for a status code.
func StatusString(s Status) string {
	if t, ok := statusText[s]; ok {
		return t
	}
	return fmt.Sprintf("Unknown error %d", int(s))
}

// Error reports a UCX failure: the operation and UCX's status.
type Error struct {
	Op     string
	Status Status
}

// Error returns the operation and UCX's text for the status.
func (e *Error) Error() string {
	return fmt.Sprintf("ucx: %s: %s", e.Op, StatusString(e.Status))
}

// Unwrap maps UCX's peer failures onto errno values, so that callers can
// test them with errors.Is.
func (e *Error) Unwrap() error {
	switch {
	case e.Status == StatusUnreachable:
		return syscall.ECONNREFUSED
	case e.Status == StatusConnReset, e.Status == StatusTimedOut, e.Status == StatusIOError,
		e.Status <= statusFirstEndpointFailure && e.Status >= statusLastEndpointFailure,
		e.Status <= statusFirstLinkFailure && e.Status >= statusLastLinkFailure:
		return syscall.ECONNRESET
	case e.Status == StatusNoMemory:
		return syscall.ENOMEM
	case e.Status == StatusCanceled:
		return syscall.ECANCELED
	case e.Status == StatusInvalidAddr:
		return ErrBadAddress
	}
	return nil
}

// Event kinds reported by Progress: engine's kinds (the cgo build checks
// them against glue.h's CUCX_EV_*; a finished flush and a finished
// zero-copy send are both engine.Done).
const (
	EventFrame   = engine.Frame   // an active message arrived
	EventEPError = engine.EPError // an endpoint failed
	EventBad     = engine.Bad     // an active message ucxnet cannot take (dropped)
	EventFlushed = engine.Done    // an endpoint flush finished
	EventSent    = engine.Done    // a zero-copy send (SendFramesZC) finished
)

// HeaderMax is how many bytes of a received AM header an Event keeps
// (glue.h's CUCX_HDR_MAX).
const HeaderMax = engine.HeaderMax

// Event is one thing UCX reported during Progress, in the engine's
// vocabulary, filled straight from the C event array. Data points into C
// memory that stays valid until the next Progress, Arm or Close, unless
// held (Event.Hold, which is how ucxnet reads payloads straight out of
// UCX's receive descriptors). From is UCX's reply_ep for the sender, as a
// number only ever compared. An EPError's EP holds a cucx EP.
type Event = engine.Event

// DataRef is a handle on received data kept past its batch (Event.Hold),
// released with Worker.Release. Its layout is cucx_data_t's.
type DataRef = stream.Ref

// Setting is one UCX configuration variable, named without the UCX_ prefix.
type Setting struct{ Name, Value string }

// Stats are the binding's counters.
type Stats struct {
	Inflight      uint64 // sends and endpoint closes UCX has not completed
	InflightBytes uint64 // payload bytes in C-owned send buffers UCX has not completed
	SendErrors    uint64 // sends completed with an error
	BufferedDone  uint64 // buffered sends (counted in InflightBytes) that UCX completed since
	BufAllocs     uint64 // send and receive buffers allocated (pool misses)
	PoolGets      uint64 // send and receive buffers taken (pool hits and misses)
	PooledBytes   uint64 // bytes of the buffers waiting in the pool
	ImmSends      uint64 // sends UCX completed straight from the caller's memory (no copy)
	ZCFrames      uint64 // frames sent from the caller's pinned memory (SendFramesZC)
}

// Transports extracts the transport/device names (e.g. "tcp/lo",
// "posix/memory") from an EPInfo text.
func Transports(info string) []string {
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(info, "\n") {
		// lines look like "#                 lane[0]:  2:posix/memory.0 md1 ..."
		i := strings.Index(line, "lane[")
		if i < 0 {
			continue
		}
		rest := line[i:]
		j := strings.Index(rest, ":")
		if j < 0 {
			continue
		}
		f := strings.Fields(rest[j+1:])
		if len(f) == 0 {
			continue
		}
		tl := f[0]
		if k := strings.Index(tl, ":"); k >= 0 {
			tl = tl[k+1:]
		}
		if k := strings.LastIndex(tl, "."); k > strings.Index(tl, "/") && k >= 0 {
			tl = tl[:k]
		}
		if !seen[tl] {
			seen[tl] = true
			out = append(out, tl)
		}
	}
	return out
}
