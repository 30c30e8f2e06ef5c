package stream

import "errors"

// Reassembly errors.
var (
	// ErrDuplicate means the segment's sequence number was already delivered
	// or is already pending. The caller drops the segment; the Reassembler is
	// unchanged.
	ErrDuplicate = errors.New("stream: duplicate segment")
	// ErrTooFarAhead means the segment lies beyond the reassembly window; the
	// peer is misbehaving and the caller should reset the connection.
	ErrTooFarAhead = errors.New("stream: segment too far ahead")
	// ErrAfterFin means a segment lies after the stream's FIN, a second FIN
	// disagrees with the first, or anything arrived after the FIN was
	// delivered.
	ErrAfterFin = errors.New("stream: segment after FIN")
)

// Segment is one ordered frame of a stream direction.
type Segment struct {
	Kind Kind   // KindData or KindFin
	Seq  uint64 // sequence number; the first segment of a direction is 0
	Data []byte // payload of a KindData segment; empty for KindFin
	Ref  Ref    // the caller's handle on Data's memory; opaque here
}

// Ref is an opaque handle a caller attaches to a Segment, carried along
// untouched: ucxnet keeps the UCX receive descriptor that holds Data in it,
// to release it once Data is read.
type Ref struct {
	Ptr  uintptr
	Kind uint32
}

// SegmentOverhead is what Cost charges for each held out-of-order segment
// beyond its payload: about what a held segment costs in memory (map entry,
// Segment, slice header). A peer sending tiny frames out of order pays for
// the memory they take, not only for their bytes.
const SegmentOverhead = 160

// Drain removes and returns every held out-of-order segment, so that the
// caller can release their memory (when a conn is torn down).
func (r *Reassembler) Drain() []Segment {
	out := make([]Segment, 0, len(r.pending))
	for seq, s := range r.pending {
		out = append(out, s)
		delete(r.pending, seq)
	}
	r.pendingBytes = 0
	return out
}

// Reassembler puts the ordered frames (KindData and KindFin) of one stream
// direction back in sequence order. It is not safe for concurrent use.
type Reassembler struct {
	next         uint64             // next sequence number to deliver
	maxAhead     uint64             // accepted: [next, next+maxAhead)
	pending      map[uint64]Segment // held out-of-order segments
	pendingBytes int
	maxPending   uint64 // highest pending seq; valid while pending is non-empty
	finKnown     bool   // a FIN has been accepted (pending or delivered)
	finSeq       uint64
	finDone      bool      // the FIN has been delivered
	out          []Segment // reused result buffer
}

// NewReassembler returns a Reassembler that expects sequence number 0
// first and accepts sequence numbers in [next, next+maxAhead). A maxAhead
// of 0 is treated as 1 (strictly in-order delivery only).
func NewReassembler(maxAhead uint64) *Reassembler {
	return &Reassembler{maxAhead: max(maxAhead, 1)}
}

// Push accepts one segment and returns the segments that are now
// deliverable, in sequence order starting at the previous Next (possibly
// none). The returned slice is reused: it is valid only until the next
// call to Push. For a segment held out of order, Push retains s.Data, so
// the caller must not modify it afterwards.
//
// Errors leave the Reassembler unchanged: ErrDuplicate for a sequence
// number below Next or already pending; ErrTooFarAhead for one at or
// beyond Next+maxAhead; ErrAfterFin for a segment after a known FIN, a
// second FIN with a different sequence number, a FIN before an already
// pending segment, or any segment once the FIN was delivered;
// ErrUnknownKind for a kind other than KindData or KindFin; and
// ErrUnexpectedPayload for a FIN with data.
func (r *Reassembler) Push(s Segment) ([]Segment, error) {
	if err := r.check(s); err != nil {
		return nil, err
	}
	clear(r.out) // drop references held from the previous call
	r.out = r.out[:0]
	if s.Seq != r.next {
		if r.pending == nil {
			r.pending = make(map[uint64]Segment)
		}
		if len(r.pending) == 0 || s.Seq > r.maxPending {
			r.maxPending = s.Seq
		}
		r.pending[s.Seq] = s
		r.pendingBytes += len(s.Data)
		if s.Kind == KindFin {
			r.finKnown, r.finSeq = true, s.Seq
		}
		return r.out, nil
	}
	r.deliver(s)
	for len(r.pending) > 0 { // slow path: drain what s unblocked
		p, ok := r.pending[r.next]
		if !ok {
			break
		}
		delete(r.pending, r.next)
		r.pendingBytes -= len(p.Data)
		r.deliver(p)
	}
	return r.out, nil
}

// check validates s against the current state without changing it.
func (r *Reassembler) check(s Segment) error {
	switch {
	case r.finDone:
		return ErrAfterFin
	case s.Kind != KindData && s.Kind != KindFin:
		return ErrUnknownKind
	case s.Kind == KindFin && len(s.Data) > 0:
		return ErrUnexpectedPayload
	case s.Seq < r.next:
		return ErrDuplicate
	case s.Seq-r.next >= r.maxAhead:
		return ErrTooFarAhead
	}
	if _, ok := r.pending[s.Seq]; ok {
		return ErrDuplicate
	}
	if r.finKnown && (s.Seq > r.finSeq || s.Kind == KindFin) {
		return ErrAfterFin // beyond the FIN, or a second, different FIN
	}
	if s.Kind == KindFin && len(r.pending) > 0 && r.maxPending > s.Seq {
		return ErrAfterFin // data already pending beyond this FIN
	}
	return nil
}

// deliver appends s to the result and advances next.
func (r *Reassembler) deliver(s Segment) {
	r.out = append(r.out, s)
	r.next++
	if s.Kind == KindFin {
		r.finKnown, r.finSeq, r.finDone = true, s.Seq, true
	}
}

// Next returns the next sequence number expected in order.
func (r *Reassembler) Next() uint64 { return r.next }

// Pending returns the number of out-of-order segments held.
func (r *Reassembler) Pending() int { return len(r.pending) }

// PendingBytes returns the total payload bytes of the held segments.
func (r *Reassembler) PendingBytes() int { return r.pendingBytes }

// Cost returns the memory the held segments are charged: their payload
// plus SegmentOverhead each. Callers bound it (ucxnet: by the receive
// window) and reset a conn whose peer exceeds the bound.
func (r *Reassembler) Cost() int { return r.pendingBytes + SegmentOverhead*len(r.pending) }

// FinDelivered reports whether the FIN has been delivered by Push; after
// that every Push fails with ErrAfterFin.
func (r *Reassembler) FinDelivered() bool { return r.finDone }
