//go:build !(linux && cgo)

package cucx

// The stub binding, built without cgo or off Linux: Open fails with
// ErrUnsupported, so no Worker ever exists and its methods are never
// reached; they still compile and, called on a zero Worker, return errors
// or zero values instead of panicking.

import "fmt"

func unsupported(op string) error { return fmt.Errorf("%w (%s)", ErrUnsupported, op) }

// Version returns "" in a build without UCX.
func Version() string { return "" }

// EP is a UCP endpoint handle. The zero EP is no endpoint.
type EP struct{ p uintptr }

// Valid reports whether e refers to an endpoint.
func (e EP) Valid() bool { return e.p != 0 }

// Worker is one UCP context with one worker (never created in this build).
type Worker struct{}

// Open fails with an error wrapping ErrUnsupported in this build.
func Open(settings []Setting) (*Worker, error) { return nil, unsupported("open worker") }

// Close does nothing.
func (w *Worker) Close() {}

// EventFD returns -1.
func (w *Worker) EventFD() int { return -1 }

// MaxAMHeader returns 0.
func (w *Worker) MaxAMHeader() int { return 0 }

// Address fails with ErrUnsupported.
func (w *Worker) Address() ([]byte, error) { return nil, unsupported("get worker address") }

// Connect validates addr, then fails with ErrUnsupported.
func (w *Worker) Connect(addr []byte) (EP, error) {
	if err := ValidateAddress(addr); err != nil {
		return EP{}, err
	}
	return EP{}, unsupported("create endpoint")
}

// CloseEP fails with ErrUnsupported.
func (w *Worker) CloseEP(ep EP, force bool) error { return unsupported("close endpoint") }

// FlushWorker fails with ErrUnsupported.
func (w *Worker) FlushWorker() (done bool, err error) { return false, unsupported("flush worker") }

// Flushing reports false.
func (w *Worker) Flushing() bool { return false }

// Flush fails with ErrUnsupported.
func (w *Worker) Flush(ep EP, token uint64) (done bool, err error) {
	return false, unsupported("flush endpoint")
}

// EPInfo returns "".
func (w *Worker) EPInfo(ep EP) string { return "" }

// Send fails with ErrUnsupported.
func (w *Worker) Send(ep EP, header, data []byte) (pending bool, err error) {
	return false, unsupported("send")
}

// Buffered is 0: there are no sends.
func (w *Worker) Buffered(ep EP) uint64 { return 0 }

// SendFrames fails with ErrUnsupported.
func (w *Worker) SendFrames(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int) (sent int, pending bool, err error) {
	return 0, false, unsupported("send")
}

// SendFramesZC fails with ErrUnsupported.
func (w *Worker) SendFramesZC(ep EP, header []byte, seqOff, lenOff int, seq uint64, data []byte, frame int, token uint64) (sent int, wait bool, err error) {
	return 0, false, unsupported("send")
}

// Progress returns evs unchanged.
func (w *Worker) Progress(evs []Event, maxEvents int, release []DataRef) ([]Event, int) {
	return evs, 0
}

// MarkHeld does nothing.
func (w *Worker) MarkHeld(evs []Event) {}

// Release does nothing.
func (w *Worker) Release(refs []DataRef) {}

// Arm fails with ErrUnsupported.
func (w *Worker) Arm() (busy bool, err error) { return false, unsupported("arm worker") }

// ReleaseEvents does nothing.
func (w *Worker) ReleaseEvents() {}

// Signal fails with ErrUnsupported.
func (w *Worker) Signal() error { return unsupported("signal worker") }

// Stats returns zero counters.
func (w *Worker) Stats() Stats { return Stats{} }

// TrimPool does nothing.
func (w *Worker) TrimPool() {}

// BuildRelease returns "" in a build without UCX.
func BuildRelease() string { return "" }

// LibraryPath returns "" in a build without UCX.
func LibraryPath() string { return "" }
