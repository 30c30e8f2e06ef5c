package session

import (
	"fmt"

	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// MaxAhead bounds how far past the next expected frame a frame may arrive
// (UCX does not promise AM order); beyond it Push fails.
const MaxAhead = 1 << 16

// Inbound is a stream's receive side: the frames that arrived, put back
// in order, and the in-order data not yet read, with the receive window
// that bounds them. A payload of holdMin bytes or more stays in the
// engine's memory, held until Read has copied it out; smaller ones are
// copied, and those in order are coalesced into pooled buffers of
// capacity holdMin, so that a window of tiny frames costs about its bytes
// rather than a held engine buffer each. Its owner's lock guards it (the
// conn's mutex); it does no locking of its own.
type Inbound struct {
	win     stream.RecvWindow
	reasm   *stream.Reassembler
	segs    []stream.Segment // in-order data not yet read; Data is held engine memory (Ref) or Go memory
	pool    *BufPool
	holdMin int
}

// NewInbound returns a receive side with a window of window bytes whose
// payloads below holdMin bytes are copied into buffers from pool.
func NewInbound(window uint32, holdMin int, pool *BufPool) Inbound {
	return Inbound{win: stream.NewRecvWindow(window), reasm: stream.NewReassembler(MaxAhead), pool: pool, holdMin: holdMin}
}

// Push takes a DATA or FIN frame with header h and the event that carried
// it, and reports whether it made data (or the FIN) readable, and whether
// the FIN is now delivered. An error is the peer's violation of the
// protocol (a frame too far ahead, past the window, or out-of-order
// frames costing more than the window), except stream.ErrDuplicate: a
// frame seen before, dropped. A payload Push keeps in the engine's memory
// is held (ev.Hold): Read, Keep or Drop gives it back.
func (in *Inbound) Push(h stream.Header, ev *engine.Event) (readable, fin bool, err error) {
	seg := stream.Segment{Kind: h.Kind, Seq: h.Seq, Data: ev.Data, Ref: ev.Ref}
	small := len(ev.Data) < in.holdMin
	if small && len(ev.Data) > 0 {
		// In order, copied straight into the read buffer (appendSeg); out
		// of order, into a copy the reassembler keeps.
		seg.Ref = stream.Ref{}
		if h.Seq != in.reasm.Next() {
			seg.Data = append([]byte(nil), ev.Data...)
		}
	}
	segs, err := in.reasm.Push(seg)
	if err != nil {
		return false, false, err // not held: released with the batch
	}
	if len(ev.Data) > 0 {
		if !small {
			ev.Hold() // the segment is in segs or pending now
		}
		if err := in.win.Receive(len(ev.Data)); err != nil {
			return false, false, err
		}
	}
	if in.reasm.Cost() > int(in.win.Size()) {
		// Out-of-order frames are charged their memory, not only their
		// bytes: a peer sending tiny frames out of order cannot make a
		// stream hold many times its window.
		return false, false, fmt.Errorf("out-of-order frames hold %d bytes (with per-frame overhead), more than the %d-byte window", in.reasm.Cost(), in.win.Size())
	}
	for _, s := range segs {
		if s.Kind == stream.KindFin {
			fin = true
		} else {
			in.appendSeg(s)
		}
	}
	return len(segs) > 0, fin, nil
}

// appendSeg queues an in-order segment for Read. Small Go-owned payloads
// are coalesced into the tail buffer.
func (in *Inbound) appendSeg(s stream.Segment) {
	if s.Ref.Kind == 0 && len(in.segs) > 0 {
		tail := &in.segs[len(in.segs)-1]
		if tail.Ref.Kind == 0 && cap(tail.Data)-len(tail.Data) >= len(s.Data) {
			tail.Data = append(tail.Data, s.Data...)
			return
		}
	}
	if s.Ref.Kind == 0 && len(s.Data) < in.holdMin {
		buf := in.pool.Get()
		if buf == nil {
			buf = make([]byte, 0, in.holdMin)
		}
		buf = buf[:len(s.Data)]
		copy(buf, s.Data)
		s.Data = buf
	}
	in.segs = append(in.segs, s)
}

// Ready reports whether Read has data to copy out.
func (in *Inbound) Ready() bool { return len(in.segs) > 0 }

// Unread reports whether data arrived that was not read: in order, or
// waiting for a gap to fill.
func (in *Inbound) Unread() bool { return len(in.segs) > 0 || in.reasm.Pending() > 0 }

// Read copies in-order data into b and returns how much, appending to done
// the engine buffers it emptied, which the caller releases (outside its
// lock). Emptied pooled buffers go back to the pool. The bytes read are
// not consumed from the window until Consume.
func (in *Inbound) Read(b []byte, done []stream.Ref) (int, []stream.Ref) {
	n := 0
	for n < len(b) && len(in.segs) > 0 {
		seg := &in.segs[0]
		m := copy(b[n:], seg.Data)
		n += m
		if m < len(seg.Data) {
			seg.Data = seg.Data[m:]
			break
		}
		if seg.Ref.Kind != 0 {
			done = append(done, seg.Ref)
		} else if cap(seg.Data) == in.holdMin {
			in.pool.Put(seg.Data) // one of appendSeg's, whole: never resliced from the front
		}
		in.segs[0] = stream.Segment{}
		in.segs = in.segs[1:]
	}
	if len(in.segs) == 0 {
		in.segs = in.segs[:0:0]
	}
	return n, done
}

// Consume frees n bytes of the window, which Read copied out, and reports
// the limit to advertise to the peer and whether to send it now.
func (in *Inbound) Consume(n int) (limit uint64, send bool) { return in.win.Consume(n) }

// Resize sets the window to size bytes, as Consume reports.
func (in *Inbound) Resize(size uint32) (limit uint64, send bool) { return in.win.Resize(size) }

// Size returns the window's size.
func (in *Inbound) Size() uint32 { return in.win.Size() }

// Buffered returns the bytes received and not yet consumed.
func (in *Inbound) Buffered() int { return in.win.Buffered() }

// Next returns the sequence number of the next in-order frame.
func (in *Inbound) Next() uint64 { return in.reasm.Next() }

// Keep moves unread data out of engine memory into Go memory, so that it
// stays readable after the stream leaves its engine (a peer's reset or
// failure does not discard what already arrived), and discards the frames
// that can never be delivered now. It returns the engine buffers to
// release.
func (in *Inbound) Keep() []stream.Ref {
	var refs []stream.Ref
	for i := range in.segs {
		s := &in.segs[i]
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
			s.Data = append([]byte(nil), s.Data...)
			s.Ref = stream.Ref{}
		}
	}
	return appendRefs(refs, in.reasm.Drain())
}

// Drop discards all data not yet read and returns the engine buffers to
// release.
func (in *Inbound) Drop() []stream.Ref {
	refs := appendRefs(nil, in.segs)
	in.segs = nil
	return appendRefs(refs, in.reasm.Drain())
}

// appendRefs appends the engine buffers of segs to refs.
func appendRefs(refs []stream.Ref, segs []stream.Segment) []stream.Ref {
	for _, s := range segs {
		if s.Ref.Kind != 0 {
			refs = append(refs, s.Ref)
		}
	}
	return refs
}
