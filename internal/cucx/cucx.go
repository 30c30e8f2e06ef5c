//go:build linux && cgo

package cucx

/*
#cgo pkg-config: ucx
#include <stdlib.h>
#include "glue.h"

static ucs_status_t cucx_signal(cucx_worker_t *w) { return ucp_worker_signal(w->worker); }
*/
import "C"

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// The shared constants (common.go) must equal UCX's and glue.h's.
var (
	_ [1]struct{} = [1 + StatusOK - C.UCS_OK]struct{}{}
	_ [1]struct{} = [1 + StatusInProgress - C.UCS_INPROGRESS]struct{}{}
	_ [1]struct{} = [1 + StatusIOError - C.UCS_ERR_IO_ERROR]struct{}{}
	_ [1]struct{} = [1 + StatusNoMemory - C.UCS_ERR_NO_MEMORY]struct{}{}
	_ [1]struct{} = [1 + StatusUnreachable - C.UCS_ERR_UNREACHABLE]struct{}{}
	_ [1]struct{} = [1 + StatusInvalidAddr - C.UCS_ERR_INVALID_ADDR]struct{}{}
	_ [1]struct{} = [1 + StatusBusy - C.UCS_ERR_BUSY]struct{}{}
	_ [1]struct{} = [1 + StatusCanceled - C.UCS_ERR_CANCELED]struct{}{}
	_ [1]struct{} = [1 + StatusTimedOutOp - C.UCS_ERR_TIMED_OUT]struct{}{}
	_ [1]struct{} = [1 + StatusNotConnected - C.UCS_ERR_NOT_CONNECTED]struct{}{}
	_ [1]struct{} = [1 + StatusConnReset - C.UCS_ERR_CONNECTION_RESET]struct{}{}
	_ [1]struct{} = [1 + StatusTimedOut - C.UCS_ERR_ENDPOINT_TIMEOUT]struct{}{}
	_ [1]struct{} = [1 + statusFirstLinkFailure - C.UCS_ERR_FIRST_LINK_FAILURE]struct{}{}
	_ [1]struct{} = [1 + statusLastEndpointFailure - C.UCS_ERR_LAST_ENDPOINT_FAILURE]struct{}{}
	_ [1]struct{} = [1 + EventFrame - C.CUCX_EV_FRAME]struct{}{}
	_ [1]struct{} = [1 + EventEPError - C.CUCX_EV_EP_ERROR]struct{}{}
	_ [1]struct{} = [1 + EventBad - C.CUCX_EV_BAD]struct{}{}
	_ [1]struct{} = [1 + EventFlushed - C.CUCX_EV_FLUSHED]struct{}{}
	_ [1]struct{} = [1 + HeaderMax - C.CUCX_HDR_MAX]struct{}{}
	_ [1]struct{} = [1 + MaxAddressLen - C.CUCX_ADDR_MAX]struct{}{}
)

func statusErr(op string, st C.ucs_status_t) error {
	if st == C.UCS_OK || st == C.UCS_INPROGRESS {
		return nil
	}
	return &Error{Op: op, Status: Status(st)}
}

// cStatusString returns UCX's own text for a status (tests compare it with
// StatusString's table).
func cStatusString(s Status) string {
	return C.GoString(C.ucs_status_string(C.ucs_status_t(s)))
}

// Version returns the version of the UCX library in use, e.g. "1.13.1".
func Version() string {
	return C.GoString(C.ucp_get_version_string())
}

// EP is a UCP endpoint handle (with the glue's accounting of its sends:
// cucx_ep_t). The zero EP is no endpoint.
type EP struct{ p *C.cucx_ep_t }

// Valid reports whether e refers to an endpoint.
func (e EP) Valid() bool { return e.p != nil }

// Worker is one UCP context with one worker.
type Worker struct {
	w *C.cucx_worker_t
}

// quiet keeps UCX's own log lines (WARN and ERROR, with epoch
// timestamps) out of the program's stderr unless the environment sets
// UCX_LOG_LEVEL: it sets UCX's log level to fatal, once. Open calls it;
// ucxnet's errors say what went wrong.
var quiet = sync.OnceFunc(func() {
	if _, set := os.LookupEnv("UCX_LOG_LEVEL"); !set {
		C.cucx_quiet()
	}
})

// Open creates a UCP context and worker with the given configuration
// overrides (applied on top of the UCX_* environment).
func Open(settings []Setting) (*Worker, error) {
	quiet()
	names := make([]*C.char, len(settings)+1)
	values := make([]*C.char, len(settings)+1)
	for i, s := range settings {
		names[i] = C.CString(s.Name)
		values[i] = C.CString(s.Value)
	}
	defer func() {
		for i := range settings {
			C.free(unsafe.Pointer(names[i]))
			C.free(unsafe.Pointer(values[i]))
		}
	}()
	var w *C.cucx_worker_t
	st := C.cucx_open(&w, &names[0], &values[0], C.int(len(settings)))
	if err := statusErr("open worker", st); err != nil {
		return nil, err
	}
	if w.max_am_header < 32 {
		C.cucx_close(w)
		return nil, errors.New("ucx: worker's max AM header is smaller than 32 bytes")
	}
	return &Worker{w: w}, nil
}

// Close destroys the worker and its context. Endpoints must be closed first.
func (w *Worker) Close() {
	if w.w != nil {
		C.cucx_close(w.w)
		w.w = nil
	}
}

// EventFD returns the worker's event file descriptor for wake-up (poll for
// readability after a successful Arm).
func (w *Worker) EventFD() int { return int(w.w.efd) }

// MaxAMHeader returns the largest AM user header the worker can send.
func (w *Worker) MaxAMHeader() int { return int(w.w.max_am_header) }

// Address returns a copy of the worker's packed address.
func (w *Worker) Address() ([]byte, error) {
	var p unsafe.Pointer
	var n C.size_t
	if err := statusErr("get worker address", C.cucx_address(w.w, &p, &n)); err != nil {
		return nil, err
	}
	defer C.cucx_release_address(w.w, p)
	return C.GoBytes(p, C.int(n)), nil
}

// Connect creates an endpoint to the worker whose packed address is addr,
// with peer error handling: its failure is reported as an EventEPError.
// addr is checked with ValidateAddress first (UCX 1.13 aborts the process
// on many malformed addresses), then with CheckTransports (an interface
// that lies about its transport crashes UCX in ucp_ep_create): a bad one
// gives an error wrapping ErrBadAddress or ErrBadTransport and never
// reaches UCX.
func (w *Worker) Connect(addr []byte) (EP, error) {
	if err := ValidateAddress(addr); err != nil {
		return EP{}, err
	}
	if err := CheckTransports(addr); err != nil {
		return EP{}, err
	}
	return w.connectUnchecked(addr)
}

// connectUnchecked is Connect without ValidateAddress (tests use it, in a
// child process, to show what UCX does with addresses the check rejects).
func (w *Worker) connectUnchecked(addr []byte) (EP, error) {
	if len(addr) == 0 {
		return EP{}, &Error{Op: "create endpoint", Status: StatusInvalidAddr}
	}
	var ep *C.cucx_ep_t
	st := C.cucx_ep_create(w.w, unsafe.Pointer(&addr[0]), C.size_t(len(addr)), &ep)
	runtime.KeepAlive(addr)
	if err := statusErr("create endpoint", st); err != nil {
		return EP{}, err
	}
	return EP{ep}, nil
}

func (e EP) h() *C.cucx_ep_t { return e.p }

// Buffered returns the payload bytes of sends on ep that UCX could not
// finish at once and still holds (copies in C buffers): nonzero while the
// peer, or the path to it, is backed up. It reads C memory without the
// worker lock, so ep must not be closed yet.
func (w *Worker) Buffered(ep EP) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&ep.p.inflight_bytes)))
}

// CloseEP starts closing ep: force cancels queued sends, otherwise they are
// flushed first. The endpoint handle must not be used afterwards (its
// accounting is freed once the close and every send on it are done).
func (w *Worker) CloseEP(ep EP, force bool) error {
	f := C.int(0)
	if force {
		f = 1
	}
	return statusErr("close endpoint", C.cucx_ep_close(w.w, ep.h(), f))
}

// Flush starts flushing ep. done reports that it finished at once;
// otherwise an EventFlushed with token follows.
func (w *Worker) Flush(ep EP, token uint64) (done bool, err error) {
	st := C.cucx_ep_flush(w.w, ep.h(), C.uint64_t(token))
	return st == C.UCS_OK, statusErr("flush endpoint", st)
}

// FlushWorker starts flushing the whole worker: every endpoint's sends
// and UCX's own messages (a wireup reply still waiting for its
// connection among them). Unless done, Flushing reports it until it
// finishes (it is not counted in Stats().Inflight).
func (w *Worker) FlushWorker() (done bool, err error) {
	st := C.cucx_worker_flush(w.w)
	return st == C.UCS_OK, statusErr("flush worker", st)
}

// Flushing reports whether a flush FlushWorker started is not done yet.
func (w *Worker) Flushing() bool { return w.w.flushing != 0 }

// EPInfo returns UCX's description of the endpoint's configuration
// (ucp_ep_print_info): its lanes, transports and devices.
func (w *Worker) EPInfo(ep EP) string {
	p := C.cucx_ep_info(ep.h())
	if p == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p)
}

// Send sends one frame: header as the AM user header and data as the
// payload. Both are copied before Send returns. pending reports that UCX
// still owns the copy and needs progress to finish it.
func (w *Worker) Send(ep EP, header, data []byte) (pending bool, err error) {
	var hp, dp unsafe.Pointer
	if len(header) > 0 {
		hp = unsafe.Pointer(&header[0])
	}
	if len(data) > 0 {
		dp = unsafe.Pointer(&data[0])
	}
	st := C.cucx_send(w.w, ep.h(), hp, C.size_t(len(header)), dp, C.size_t(len(data)))
	runtime.KeepAlive(header)
	runtime.KeepAlive(data)
	return st == C.UCS_INPROGRESS, statusErr("send", st)
}

// SendFrames sends data as consecutive frames of at most frame bytes, in one
// call. header is a template: frame i gets sequence number seq+i written at
// seqOff (8 bytes, little endian) and its length at lenOff (4 bytes, little
// endian). It returns how many data bytes were handed to UCX.
func (w *Worker) SendFrames(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (sent int, pending bool, err error) {
	if len(data) == 0 {
		return 0, false, nil
	}
	var n C.size_t
	st := C.cucx_send_frames(w.w, ep.h(), (*C.uint8_t)(unsafe.Pointer(&header[0])), C.size_t(len(header)),
		C.size_t(seqOff), C.size_t(lenOff), C.uint64_t(seq),
		(*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.size_t(frame), &n)
	runtime.KeepAlive(header)
	runtime.KeepAlive(data)
	return int(n), st == C.UCS_INPROGRESS, statusErr("send", st)
}

// SendFramesZC sends like SendFrames but straight from data, without
// copying it: UCX reads data until the send finishes. The caller must keep
// data pinned (runtime.Pinner) and unchanged until then. wait = false means
// UCX is done with data when SendFramesZC returns; wait = true means an
// EventSent carrying token will report the end (also after an error, for
// the frames handed over before it).
//
// Only the headers are copied. The caller must not use this for memory
// that UCX would register with a registration cache (RDMA transports): UCX
// cannot see the Go runtime return pages to the kernel, so a cached
// registration of Go memory may go stale.
func (w *Worker) SendFramesZC(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int, token uint64) (sent int, wait bool, err error) {
	if len(data) == 0 {
		return 0, false, nil
	}
	var n C.size_t
	var cw C.int
	st := C.cucx_send_frames_zc(w.w, ep.h(), (*C.uint8_t)(unsafe.Pointer(&header[0])), C.size_t(len(header)),
		C.size_t(seqOff), C.size_t(lenOff), C.uint64_t(seq),
		(*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.size_t(frame), C.uint64_t(token), &n, &cw)
	runtime.KeepAlive(header)
	runtime.KeepAlive(data)
	return int(n), cw != 0, statusErr("send", st)
}

// Progress releases the previous batch of events, progresses the worker
// until it is idle or maxEvents events wait, and appends those events to
// evs. It returns the extended slice and UCX's progress count.
//
// release is held data to release first, in the same call.
func (w *Worker) Progress(evs []Event, maxEvents int, release []DataRef) ([]Event, int) {
	var rp *C.cucx_data_t
	if len(release) > 0 {
		rp = (*C.cucx_data_t)(unsafe.Pointer(&release[0]))
	}
	n := int(C.cucx_progress(w.w, C.size_t(maxEvents), rp, C.size_t(len(release))))
	runtime.KeepAlive(release)
	return w.events(evs), n
}

func (w *Worker) events(evs []Event) []Event {
	nev := int(w.w.nev)
	var all []C.cucx_event_t
	if nev > 0 {
		all = unsafe.Slice(w.w.ev, nev) // C memory, read without cgo calls
	}
	for i := range all {
		e := &all[i]
		evs = append(evs, Event{Kind: engine.Kind(e.kind), HdrLen: int(e.hdr_len), DataLen: int(e.len)})
		ev := &evs[len(evs)-1]
		switch e.kind {
		case C.CUCX_EV_EP_ERROR:
			ev.EP = engine.NewEP(EP{e.ep})
			ev.Err = &Error{Op: "endpoint", Status: Status(e.status)}
		case C.CUCX_EV_FLUSHED:
			ev.Token = uint64(e.token)
			ev.Err = statusErr("flush", C.ucs_status_t(e.status))
		default:
			copy(ev.Hdr[:], unsafe.Slice((*byte)(unsafe.Pointer(&e.hdr[0])), HeaderMax))
			ev.From = uintptr(e.from)
			if e.data != nil {
				ev.Data = unsafe.Slice((*byte)(e.data), int(e.len))
				ev.Ref = DataRef{Ptr: uintptr(e.data), Kind: uint32(e.data_kind)}
			}
		}
	}
	// Finished zero-copy sends come after the array's events (MarkHeld
	// relies on the array's events coming first).
	for op := w.w.zc_done; op != nil; op = op.next {
		evs = append(evs, Event{Kind: engine.Done, Token: uint64(op.token), Err: statusErr("send", C.ucs_status_t(op.status))})
	}
	// What was read is released with the next batch; what UCX records
	// from now on is not (see cucx_release_events).
	w.w.nev_read = C.size_t(nev)
	w.w.zc_read = w.w.zc_done
	return evs
}

// MarkHeld tells the C side which events of the last batch were held, so
// that their data is not released with the batch.
func (w *Worker) MarkHeld(evs []Event) {
	nev := int(w.w.nev)
	if nev == 0 {
		return
	}
	all := unsafe.Slice(w.w.ev, nev)
	for i := range evs {
		if i < nev && evs[i].Held {
			all[i].data_kind = C.CUCX_DATA_NONE
		}
	}
}

// Release releases held data now. The worker must be locked.
func (w *Worker) Release(refs []DataRef) {
	if len(refs) == 0 {
		return
	}
	C.cucx_release_data(w.w, (*C.cucx_data_t)(unsafe.Pointer(&refs[0])), C.size_t(len(refs)))
	runtime.KeepAlive(refs)
}

// Arm releases the previous batch of events and arms the event fd. It
// returns StatusBusy (as a nil error with busy=true) when work is pending.
func (w *Worker) Arm() (busy bool, err error) {
	st := C.cucx_arm(w.w)
	if st == C.UCS_ERR_BUSY {
		return true, nil
	}
	return false, statusErr("arm worker", st)
}

// TrimPool frees the pooled send and receive buffers beyond the few that
// each size class keeps for good. The worker must be locked.
func (w *Worker) TrimPool() { C.cucx_trim_pool(w.w) }

// ReleaseEvents releases the data of the last batch of events.
func (w *Worker) ReleaseEvents() { C.cucx_release_events(w.w) }

// Signal wakes a thread sleeping on the event fd. It is safe to call from
// any goroutine, concurrently with the other methods.
func (w *Worker) Signal() error {
	return statusErr("signal worker", C.cucx_signal(w.w))
}

// Stats returns the binding's counters.
func (w *Worker) Stats() Stats {
	return Stats{
		Inflight:      uint64(w.w.inflight),
		InflightBytes: uint64(w.w.inflight_bytes),
		SendErrors:    uint64(w.w.send_errors),
		BufferedDone:  uint64(w.w.buffered_done),
		BufAllocs:     uint64(w.w.bufs_alloc),
		PoolGets:      uint64(w.w.pool_gets),
		PooledBytes:   uint64(w.w.pooled_bytes),
		ImmSends:      uint64(w.w.imm_sends),
		ZCFrames:      uint64(w.w.zc_frames),
	}
}

// DataRef must have cucx_data_t's layout: Release passes a []DataRef to C.
var _ [unsafe.Sizeof(DataRef{}) - C.sizeof_cucx_data_t]byte
var _ [C.sizeof_cucx_data_t - unsafe.Sizeof(DataRef{})]byte
