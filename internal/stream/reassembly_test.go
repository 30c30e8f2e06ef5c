package stream

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func data(seq uint64) Segment {
	return Segment{Kind: KindData, Seq: seq, Data: []byte{byte(seq), byte(seq >> 8)}}
}

func fin(seq uint64) Segment { return Segment{Kind: KindFin, Seq: seq} }

func seqs(ss []Segment) []uint64 {
	out := []uint64{}
	for _, s := range ss {
		out = append(out, s.Seq)
	}
	return out
}

func push(t *testing.T, r *Reassembler, s Segment) []uint64 {
	t.Helper()
	out, err := r.Push(s)
	require.NoError(t, err)
	return seqs(out)
}

func TestReassemblerInOrder(t *testing.T) {
	r := NewReassembler(8)
	for i := uint64(0); i < 100; i++ {
		out, err := r.Push(data(i))
		require.NoError(t, err)
		require.Len(t, out, 1)
		require.Equal(t, data(i), out[0])
		require.Equal(t, i+1, r.Next())
	}
	require.Equal(t, []uint64{100}, push(t, r, fin(100)))
	require.True(t, r.FinDelivered())
	require.Zero(t, r.Pending())
}

func TestReassemblerInOrderNoAlloc(t *testing.T) {
	r := NewReassembler(8)
	s := data(0)
	allocs := testing.AllocsPerRun(1000, func() {
		_, _ = r.Push(s)
		s.Seq++
	})
	require.Zero(t, allocs)
}

func TestReassemblerOutOfOrder(t *testing.T) {
	r := NewReassembler(8)
	require.Empty(t, push(t, r, data(2)))
	require.Empty(t, push(t, r, data(1)))
	require.Equal(t, 2, r.Pending())
	require.Equal(t, 4, r.PendingBytes())
	require.Equal(t, []uint64{0, 1, 2}, push(t, r, data(0)))
	require.Zero(t, r.Pending())
	require.Zero(t, r.PendingBytes())
	require.Equal(t, uint64(3), r.Next())
}

func TestReassemblerShuffled(t *testing.T) {
	const n = 1000
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		r := NewReassembler(n + 1)
		var got []uint64
		for _, i := range rng.Perm(n + 1) {
			s := data(uint64(i))
			if i == n {
				s = fin(n)
			}
			out, err := r.Push(s)
			require.NoError(t, err)
			for _, o := range out {
				if o.Kind == KindData {
					require.Equal(t, data(o.Seq).Data, o.Data)
				}
				got = append(got, o.Seq)
			}
			require.LessOrEqual(t, r.Pending(), n)
		}
		require.Len(t, got, n+1)
		for i, s := range got {
			require.Equal(t, uint64(i), s)
		}
		require.True(t, r.FinDelivered())
		require.Zero(t, r.Pending())
		require.Zero(t, r.PendingBytes())
	}
}

// snapshot captures the observable state, to check errors change nothing.
type snapshot struct {
	next, pending, bytes int
	fin                  bool
}

func snap(r *Reassembler) snapshot {
	return snapshot{int(r.Next()), r.Pending(), r.PendingBytes(), r.FinDelivered()}
}

func requireErr(t *testing.T, r *Reassembler, s Segment, want error) {
	t.Helper()
	before := snap(r)
	out, err := r.Push(s)
	require.ErrorIs(t, err, want)
	require.Empty(t, out)
	require.Equal(t, before, snap(r))
}

func TestReassemblerDuplicates(t *testing.T) {
	r := NewReassembler(8)
	push(t, r, data(0))
	push(t, r, data(3))
	requireErr(t, r, data(0), ErrDuplicate) // already delivered
	requireErr(t, r, data(3), ErrDuplicate) // already pending
	requireErr(t, r, fin(3), ErrDuplicate)  // pending seq, other kind
	require.Equal(t, []uint64{1}, push(t, r, data(1)))
	requireErr(t, r, data(1), ErrDuplicate)
}

func TestReassemblerTooFarAhead(t *testing.T) {
	r := NewReassembler(4)
	push(t, r, data(3)) // next+maxAhead-1 is fine
	requireErr(t, r, data(4), ErrTooFarAhead)
	requireErr(t, r, data(^uint64(0)), ErrTooFarAhead)
	push(t, r, data(0))
	push(t, r, data(4)) // window moved
	requireErr(t, r, data(5), ErrTooFarAhead)

	strict := NewReassembler(0) // treated as 1
	push(t, strict, data(0))
	requireErr(t, strict, data(2), ErrTooFarAhead)
}

func TestReassemblerBadSegment(t *testing.T) {
	r := NewReassembler(4)
	requireErr(t, r, Segment{Kind: KindRst}, ErrUnknownKind)
	requireErr(t, r, Segment{Kind: KindFin, Data: []byte{1}}, ErrUnexpectedPayload)
}

func TestReassemblerFinOrdering(t *testing.T) {
	r := NewReassembler(16)
	require.Empty(t, push(t, r, fin(5)))
	require.False(t, r.FinDelivered())
	requireErr(t, r, data(6), ErrAfterFin) // beyond the FIN
	requireErr(t, r, fin(4), ErrAfterFin)  // a different FIN
	requireErr(t, r, fin(7), ErrAfterFin)
	requireErr(t, r, fin(5), ErrDuplicate) // the same FIN again
	push(t, r, data(3))
	push(t, r, data(4))
	require.Equal(t, []uint64{0}, push(t, r, data(0)))
	require.Empty(t, push(t, r, data(2)))
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, push(t, r, data(1)))
	require.True(t, r.FinDelivered())
	require.Equal(t, uint64(6), r.Next())
}

func TestReassemblerFinBeforePending(t *testing.T) {
	r := NewReassembler(16)
	push(t, r, data(4))
	requireErr(t, r, fin(3), ErrAfterFin) // data already pending beyond it
	requireErr(t, r, fin(0), ErrAfterFin)
	push(t, r, fin(5))
}

func TestReassemblerAfterFinDelivered(t *testing.T) {
	r := NewReassembler(16)
	push(t, r, data(0))
	require.Equal(t, []uint64{1}, push(t, r, fin(1)))
	requireErr(t, r, data(2), ErrAfterFin)
	requireErr(t, r, data(0), ErrAfterFin)
	requireErr(t, r, fin(1), ErrAfterFin)
	requireErr(t, r, fin(2), ErrAfterFin)
}

func TestReassemblerEmptyStream(t *testing.T) {
	r := NewReassembler(1)
	require.Equal(t, []uint64{0}, push(t, r, fin(0)))
	require.True(t, r.FinDelivered())
}

// FuzzReassembly drives a Reassembler with operations decoded from the
// input, three bytes each: a sequence offset relative to Next, a kind
// selector and a payload length. The first byte picks maxAhead (1..16).
func FuzzReassembly(f *testing.F) {
	f.Add([]byte{7, 4, 1, 3, 5, 1, 2, 4, 1, 1, 4, 0, 3, 6, 8, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		maxAhead := uint64(in[0]%16) + 1
		in = in[1:]
		r := NewReassembler(maxAhead)
		var delivered uint64 // count of delivered segments = next expected
		finSeen := false
		for ; len(in) >= 3; in = in[3:] {
			// Offsets -4..19 around Next exercise duplicates and overruns.
			seq := int64(r.Next()) + int64(in[0]%24) - 4
			if seq < 0 {
				seq = 0
			}
			s := Segment{Kind: KindData, Seq: uint64(seq)}
			switch in[1] % 8 {
			case 0:
				s.Kind = KindFin
			case 1:
				s.Kind = Kind(in[1]) // usually invalid
			}
			if s.Kind != KindFin {
				s.Data = make([]byte, in[2]%8)
				for i := range s.Data {
					s.Data[i] = byte(s.Seq)
				}
			} else if in[2] == 0xff {
				s.Data = []byte{1}
			}
			before := snap(r)
			out, err := r.Push(s)
			if err != nil {
				if !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrTooFarAhead) &&
					!errors.Is(err, ErrAfterFin) && !errors.Is(err, ErrUnknownKind) &&
					!errors.Is(err, ErrUnexpectedPayload) {
					t.Fatalf("unexpected error %v", err)
				}
				if len(out) != 0 || snap(r) != before {
					t.Fatalf("error %v changed state or delivered", err)
				}
				if finSeen && !errors.Is(err, ErrAfterFin) {
					t.Fatalf("after FIN delivery got %v, want ErrAfterFin", err)
				}
				continue
			}
			if finSeen {
				t.Fatalf("push accepted after FIN delivered")
			}
			for _, o := range out {
				if o.Seq != delivered {
					t.Fatalf("delivered seq %d, want %d", o.Seq, delivered)
				}
				delivered++
				if finSeen {
					t.Fatalf("segment %d delivered after FIN", o.Seq)
				}
				if o.Kind == KindFin {
					finSeen = true
				}
				for _, c := range o.Data {
					if c != byte(o.Seq) {
						t.Fatalf("segment %d carries data of another seq", o.Seq)
					}
				}
			}
			if r.Next() != delivered || r.FinDelivered() != finSeen {
				t.Fatalf("Next %d FinDelivered %v, want %d %v", r.Next(), r.FinDelivered(), delivered, finSeen)
			}
			if uint64(r.Pending()) >= maxAhead || r.PendingBytes() > 7*r.Pending() {
				t.Fatalf("pending %d (%d bytes) with maxAhead %d", r.Pending(), r.PendingBytes(), maxAhead)
			}
		}
	})
}

// Tiny out-of-order segments are charged for their memory, not only their
// bytes.
func TestReassemblerCostChargesOverhead(t *testing.T) {
	r := NewReassembler(1 << 16)
	for seq := uint64(1); seq <= 100; seq++ {
		if _, err := r.Push(Segment{Kind: KindData, Seq: seq, Data: []byte{1}}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.Cost(), 100*(1+SegmentOverhead); got != want {
		t.Fatalf("Cost = %d, want %d", got, want)
	}
	if _, err := r.Push(Segment{Kind: KindData, Seq: 0, Data: []byte{0}}); err != nil {
		t.Fatal(err)
	}
	if r.Cost() != 0 {
		t.Fatalf("Cost after delivery = %d, want 0", r.Cost())
	}
}
