//go:build linux

package smfifo

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	mmFifoSize      = 64  // UCX_MM_FIFO_SIZE default
	mmFifoShift     = 6   // log2(mmFifoSize)
	mmElemSize      = 128 // UCX_MM_FIFO_ELEM_SIZE default
	mmCtlSize       = 192 // UCT_MM_FIFO_CTL_SIZE: the control block, cache-line aligned
	mmTailOff       = 128 // uct_mm_fifo_ctl_t.tail (second cache line)
	mmPidOff        = 136 // uct_mm_fifo_ctl_t.pid
	mmElemHdr       = 28  // sizeof(uct_mm_fifo_element_t): inline data follows
	mmFlagOwner     = 1   // UCT_MM_FIFO_ELEM_FLAG_OWNER
	mmFlagInline    = 2   // UCT_MM_FIFO_ELEM_FLAG_INLINE
	mmHeadArmed     = 1 << 63
	ucpAMIDSingle   = 23   // UCP_AM_ID_AM_SINGLE
	cucxAMID        = 0x75 // internal/cucx's CUCX_AM_ID, the one AM id ucxnet uses
	smCheckEvery    = 100 * time.Millisecond
	smRescanEvery   = 5 * time.Second
	smStuckAfter    = 500 * time.Millisecond
	smFailureWindow = 10 * time.Second // a slot is repaired only this long after a peer failed
	smFifoSegBytes  = mmCtlSize + mmFifoSize*mmElemSize
)

// smStuck is a FIFO slot seen unpublished.
type smStuck struct {
	index uint64    // absolute FIFO index (slot index & (mmFifoSize-1))
	since time.Time // first seen
}

// Watcher is a process's watch over its own shared-memory FIFOs (they
// belong to every UCX worker of the process alike: one Watcher serves
// them all). Its methods are safe for concurrent use.
type Watcher struct {
	mu       sync.Mutex
	off      bool
	lastScan time.Time
	lastTick time.Time
	fifos    []uint64 // addresses of this process's receive FIFOs
	stuck    map[uint64]smStuck
	repaired uint64 // slots published
	// lastFailure is when a peer of this process last failed: a slot is
	// repaired only within smFailureWindow of a peer failure, so that a
	// sender that is merely slow or stopped (a debugger), which would
	// later finish its write into the slot, is not overwritten while
	// nothing says a sender died. before holds each FIFO's head at that
	// failure: only a slot claimed before it (index below it) can be the
	// dead sender's; a slot claimed since is a live sender's, however
	// long it stays unpublished.
	lastFailure time.Time
	before      map[uint64]uint64
	// mem is /proc/self/mem, opened at the first check and kept.
	mem *os.File
	// clean holds, for each FIFO whose claimed slots were all published
	// at its last check, its head and tail then: until either moves, no
	// slot can have become unpublished (a sender publishes a slot once
	// per claim, and claims by moving the head), and the check reads the
	// control block alone.
	clean map[uint64]smEnds
}

// smEnds is a FIFO's head and tail.
type smEnds struct{ head, tail uint64 }

// memFile returns /proc/self/mem, opening it on first use; nil (and w
// off) if it cannot be opened. w.mu is held.
func (w *Watcher) memFile() *os.File {
	if w.mem == nil {
		mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
		if err != nil {
			w.off = true
			return nil
		}
		w.mem = mem
	}
	return w.mem
}

// New returns the Watcher for a process that loaded UCX release (as
// "1.13.1"): off unless Verified(release) and the environment leaves
// UCX's FIFO geometry at its defaults.
func New(release string) *Watcher {
	return &Watcher{off: smFifoTuned() || !Verified(release), stuck: map[uint64]smStuck{}}
}

// NotePeerFailure records that a peer of this process failed now: the
// slots its FIFOs have handed out so far may be repaired within 10 s. It
// reads the FIFOs at once (a dead sender claims no more slots; a live one
// may claim the next at any moment).
func (w *Watcher) NotePeerFailure(now time.Time) {
	if w.off {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	mem := w.memFile()
	if mem == nil {
		return
	}
	w.lastScan = now
	w.fifos = smFindFIFOs(mem) // a failure may concern a FIFO mapped since the last scan
	w.mark(mem, now)
}

// mark records a failure at now, with each FIFO's head. w.mu is held.
func (w *Watcher) mark(mem *os.File, now time.Time) {
	w.lastFailure = now
	if w.before == nil {
		w.before = map[uint64]uint64{}
	}
	clear(w.before)
	for _, addr := range w.fifos {
		if head, _, ok := smReadCtl(mem, addr); ok {
			w.before[addr] = head
		}
	}
}

// smFifoTuned reports whether the environment changes UCX's FIFO geometry.
func smFifoTuned() bool {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "UCX_") && (strings.HasSuffix(k, "FIFO_SIZE") || strings.HasSuffix(k, "FIFO_ELEM_SIZE")) {
			return true
		}
	}
	return false
}

// Tick checks the FIFOs if the last check is 100 ms back or more. Call
// it on the engines' periodic wake-ups; concurrent calls skip.
func (w *Watcher) Tick(now time.Time) {
	if w.off || !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	if now.Sub(w.lastTick) < smCheckEvery {
		return
	}
	w.lastTick = now
	rescan := now.Sub(w.lastScan) >= smRescanEvery
	if len(w.fifos) == 0 && !rescan {
		return
	}
	mem := w.memFile()
	if mem == nil {
		return
	}
	if rescan {
		w.lastScan = now
		w.fifos = smFindFIFOs(mem)
		for addr := range w.clean {
			if !slices.Contains(w.fifos, addr) {
				delete(w.clean, addr)
			}
		}
	}
	for _, addr := range w.fifos {
		w.check(mem, addr, now)
	}
}

// check looks for the first unpublished slot of the FIFO at addr and
// publishes it once it has stayed so for smStuckAfter.
func (w *Watcher) check(mem *os.File, addr uint64, now time.Time) {
	head, tail, ok := smReadCtl(mem, addr)
	if !ok {
		delete(w.stuck, addr)
		delete(w.clean, addr)
		return
	}
	ends := smEnds{head, tail}
	if c, ok := w.clean[addr]; ok && c == ends {
		return
	}
	delete(w.clean, addr)
	var flags [1]byte
	for i := tail; i < head; i++ {
		if _, err := mem.ReadAt(flags[:], int64(addr+smElemOff(i))); err != nil {
			return
		}
		if uint64(flags[0]&mmFlagOwner) == (i>>mmFifoShift)&1 {
			continue // published
		}
		s, seen := w.stuck[addr]
		switch {
		case !seen || s.index != i:
			w.stuck[addr] = smStuck{index: i, since: now}
		case now.Sub(s.since) >= smStuckAfter && now.Sub(w.lastFailure) <= smFailureWindow && i < w.before[addr]:
			if smPublish(mem, addr, i) {
				w.repaired++
			}
			delete(w.stuck, addr)
		}
		return
	}
	delete(w.stuck, addr)
	if w.clean == nil {
		w.clean = map[uint64]smEnds{}
	}
	w.clean[addr] = ends
}

func smElemOff(i uint64) uint64 { return mmCtlSize + (i&(mmFifoSize-1))*mmElemSize }

// smReadCtl reads a FIFO's head and tail, checking that addr still holds a
// FIFO of this process.
func smReadCtl(mem *os.File, addr uint64) (head, tail uint64, ok bool) {
	var ctl [mmCtlSize]byte
	if _, err := mem.ReadAt(ctl[:], int64(addr)); err != nil {
		return 0, 0, false
	}
	le := binary.LittleEndian
	head = le.Uint64(ctl[0:]) &^ mmHeadArmed
	tail = le.Uint64(ctl[mmTailOff:])
	alen := le.Uint32(ctl[8:])
	family := le.Uint16(ctl[12:])
	if int(le.Uint32(ctl[mmPidOff:])) != os.Getpid() || family != 1 /* AF_UNIX */ || alen < 2 || alen > 110 ||
		tail > head || head-tail > mmFifoSize {
		return 0, 0, false
	}
	return head, tail, true
}

// smPublish writes slot i as an inline UCP AM_SINGLE for ucxnet's AM id
// with no header and no data, then sets its owner bit for i's lap. The
// slot's receive-descriptor fields (the receiver's own) stay as they are.
func smPublish(mem *os.File, addr, i uint64) bool {
	off := int64(addr + smElemOff(i))
	var am [3]byte // am_id, length
	am[0] = ucpAMIDSingle
	binary.LittleEndian.PutUint16(am[1:], 8)
	var hdr [8]byte // ucp_am_hdr_t: am_id, flags, header_length
	binary.LittleEndian.PutUint16(hdr[0:], cucxAMID)
	if _, err := mem.WriteAt(am[:], off+1); err != nil {
		return false
	}
	if _, err := mem.WriteAt(hdr[:], off+mmElemHdr); err != nil {
		return false
	}
	flags := byte(mmFlagInline)
	if (i>>mmFifoShift)&1 != 0 {
		flags |= mmFlagOwner
	}
	_, err := mem.WriteAt([]byte{flags}, off) // last: publishes the slot
	return err == nil
}

// smFindFIFOs lists the shared-memory mappings of this process that hold
// one of its own receive FIFOs (a segment mapped twice is listed once).
func smFindFIFOs(mem *os.File) []uint64 {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	var fifos []uint64
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte("/SYSV")) && !bytes.Contains(line, []byte("ucx_shm_posix")) {
			continue
		}
		fs := strings.Fields(string(line))
		if len(fs) < 5 || !strings.Contains(fs[1], "s") {
			continue
		}
		var start, end uint64
		if !parseRange(fs[0], &start, &end) || end-start < smFifoSegBytes {
			continue
		}
		key := fs[3] + " " + fs[4] // device and inode
		if seen[key] {
			continue
		}
		if _, _, ok := smReadCtl(mem, start); ok {
			seen[key] = true
			fifos = append(fifos, start)
		}
	}
	return fifos
}

// parseRange parses /proc/self/maps's "start-end" (hexadecimal).
func parseRange(s string, start, end *uint64) bool {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	var err1, err2 error
	*start, err1 = strconv.ParseUint(a, 16, 64)
	*end, err2 = strconv.ParseUint(b, 16, 64)
	return err1 == nil && err2 == nil && *end > *start
}

// Repairs returns how many stuck slots w has published.
func (w *Watcher) Repairs() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.repaired
}
