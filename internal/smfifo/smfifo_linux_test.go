package smfifo

import (
	"encoding/binary"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// openMem opens /proc/self/mem for the test, or skips it.
func openMem(t *testing.T) *os.File {
	t.Helper()
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		t.Skip("needs /proc/self/mem:", err)
	}
	t.Cleanup(func() { mem.Close() })
	return mem
}

// fakeFIFO lays out a receive FIFO of this process in Go memory, as UCX
// 1.13 does in its shared segment: lap 1, slots tail..head-1 claimed, each
// published unless listed in unpublished. It returns the segment and its
// address.
func fakeFIFO(t *testing.T, tail, head uint64, unpublished ...uint64) ([]byte, uint64) {
	t.Helper()
	seg := make([]byte, smFifoSegBytes)
	le := binary.LittleEndian
	le.PutUint64(seg[0:], head)
	le.PutUint32(seg[8:], 20) // the interface's socket address length
	le.PutUint16(seg[12:], 1) // AF_UNIX
	le.PutUint64(seg[mmTailOff:], tail)
	le.PutUint32(seg[mmPidOff:], uint32(os.Getpid()))
	for i := tail; i < head; i++ {
		seg[smElemOff(i)] = byte((i >> mmFifoShift) & 1) // the owner bit of i's lap
	}
	for _, i := range unpublished {
		seg[smElemOff(i)] ^= mmFlagOwner
	}
	return seg, uint64(uintptr(unsafe.Pointer(&seg[0])))
}

// A slot left unpublished for smStuckAfter, after a peer failed, is
// published as an empty inline AM for ucxnet's id; the slots around it and
// the control block are left alone.
func TestRepairPublishesStuckSlot(t *testing.T) {
	mem := openMem(t)
	seg, addr := fakeFIFO(t, 66, 69, 67)
	ctl := append([]byte(nil), seg[:mmCtlSize]...)
	w := &Watcher{stuck: map[uint64]smStuck{}}
	now := time.Now()

	w.check(mem, addr, now)
	w.check(mem, addr, now.Add(smStuckAfter))
	require.Zero(t, w.repaired, "no peer failed: a slow sender's slot is left alone")

	w.fifos = []uint64{addr}
	w.mark(mem, now)
	w.check(mem, addr, now.Add(smStuckAfter))
	require.EqualValues(t, 1, w.repaired)
	el := seg[smElemOff(67):]
	require.Equal(t, byte(mmFlagInline|mmFlagOwner), el[0], "published for lap 1, inline")
	require.Equal(t, []byte{ucpAMIDSingle, 8, 0}, el[1:4])
	require.Equal(t, []byte{cucxAMID, 0, 0, 0, 0, 0, 0, 0}, el[mmElemHdr:mmElemHdr+8])
	require.Equal(t, byte(mmFlagOwner), seg[smElemOff(66)])
	require.Equal(t, byte(mmFlagOwner), seg[smElemOff(68)])
	require.Equal(t, ctl, seg[:mmCtlSize], "the control block is the receiver's")

	w.check(mem, addr, now.Add(2*smStuckAfter))
	require.EqualValues(t, 1, w.repaired, "nothing more is stuck")
}

// A FIFO whose claimed slots were all published is not read slot by slot
// again until its head or tail moves: a slot that reads unpublished while
// both stay (which no sender can cause) goes unseen, and is seen once the
// head moves.
func TestCleanFIFOReadsControlBlockOnly(t *testing.T) {
	mem := openMem(t)
	seg, addr := fakeFIFO(t, 66, 69)
	w := &Watcher{stuck: map[uint64]smStuck{}}
	now := time.Now()
	w.check(mem, addr, now)
	require.Equal(t, smEnds{69, 66}, w.clean[addr])

	seg[smElemOff(67)] ^= mmFlagOwner
	w.check(mem, addr, now.Add(time.Millisecond))
	require.Empty(t, w.stuck, "a clean FIFO whose ends did not move is not read slot by slot")

	binary.LittleEndian.PutUint64(seg[0:], 70) // a sender claims slot 69
	seg[smElemOff(69)] = 1
	w.check(mem, addr, now.Add(2*time.Millisecond))
	require.Equal(t, uint64(67), w.stuck[addr].index, "the head moved: read again")
	require.NotContains(t, w.clean, addr)
	runtime.KeepAlive(seg)
}

// Only a slot claimed before the failure mark can be the dead sender's: a
// slot claimed since stays a live sender's, however long it takes to
// publish it, until another failure is marked after its claim.
func TestRepairOnlyBeforeFailureMark(t *testing.T) {
	mem := openMem(t)
	seg, addr := fakeFIFO(t, 66, 68)
	w := &Watcher{stuck: map[uint64]smStuck{}, fifos: []uint64{addr}}
	now := time.Now()
	w.mark(mem, now)
	binary.LittleEndian.PutUint64(seg[0:], 69) // a live sender claims slot 68 after the failure
	w.check(mem, addr, now.Add(time.Millisecond))
	w.check(mem, addr, now.Add(3*smStuckAfter))
	require.Zero(t, w.repaired, "a slot claimed after the failure mark was published")
	require.Zero(t, seg[smElemOff(68)])

	w.mark(mem, now.Add(3*smStuckAfter)) // another peer fails, after the claim
	w.check(mem, addr, now.Add(4*smStuckAfter))
	require.EqualValues(t, 1, w.repaired)
	require.Equal(t, byte(mmFlagInline|mmFlagOwner), seg[smElemOff(68)])
	runtime.KeepAlive(seg)
}

// A control block that is not this process's FIFO, or not one at all, is
// refused; the head's armed bit is not part of the index.
func TestRepairChecksControlBlock(t *testing.T) {
	mem := openMem(t)
	for name, spoil := range map[string]func([]byte){
		"other pid":   func(s []byte) { binary.LittleEndian.PutUint32(s[mmPidOff:], uint32(os.Getpid()+1)) },
		"not AF_UNIX": func(s []byte) { binary.LittleEndian.PutUint16(s[12:], 2) },
		"tail > head": func(s []byte) { binary.LittleEndian.PutUint64(s[mmTailOff:], 70) },
		"over full":   func(s []byte) { binary.LittleEndian.PutUint64(s[0:], 66+mmFifoSize+1) },
	} {
		seg, addr := fakeFIFO(t, 66, 69, 67)
		spoil(seg)
		_, _, ok := smReadCtl(mem, addr)
		require.False(t, ok, name)
		runtime.KeepAlive(seg)
	}
	seg, addr := fakeFIFO(t, 66, 69, 67)
	binary.LittleEndian.PutUint64(seg[0:], 69|mmHeadArmed) // the receiver armed the FIFO
	head, tail, ok := smReadCtl(mem, addr)
	require.True(t, ok)
	require.Equal(t, []uint64{69, 66}, []uint64{head, tail})
	runtime.KeepAlive(seg)
}

func TestVerified(t *testing.T) {
	for v, want := range map[string]bool{"1.13.1": true, "1.13": true, "1.14.0": false, "1.22.0": false, "2.13.0": false, "": false, "x.y": false} {
		require.Equal(t, want, Verified(v), v)
	}
}

func TestParseRange(t *testing.T) {
	var s, e uint64
	require.True(t, parseRange("7f00-7f80", &s, &e))
	require.Equal(t, []uint64{0x7f00, 0x7f80}, []uint64{s, e})
	for _, bad := range []string{"", "7f00", "7f80-7f00", "zz-7f00", "7f00-"} {
		require.False(t, parseRange(bad, &s, &e), bad)
	}
}
