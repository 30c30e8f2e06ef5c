// Package smfifo repairs the receive FIFOs of UCX's shared-memory
// transports (posix, sysv) that a sender killed mid-write left stuck.
//
// Every sending process writes into one FIFO per receiving interface: a
// sender claims a slot by advancing the FIFO's head, fills it, then sets
// the slot's owner bit, and the receiver reads the slots strictly in
// order. A sender killed between the claim and the owner bit (SIGKILL
// while it streams) leaves a slot that is never published, and UCX 1.13
// (up to 1.22) reads nothing past it: from then on the process receives
// nothing over shared memory from anyone, its own loopback included, and
// once the FIFO is full every sender to it blocks.
//
// A Watcher (Linux) notices such a slot — the first unpublished one, the
// same one for half a second while the engine goes on progressing, within
// 10 s of a peer of this process failing — and publishes it as an empty
// inline message (a UCP single-fragment AM for internal/cucx's AM id with
// no header, which the receiver drops as a bad frame), so that the
// receiver moves past it. It reads and writes only the FIFO's control
// block and that slot, through /proc/self/mem (never a fault on an
// unmapped segment). The layout is UCX 1.13's mm FIFO, with the default
// FIFO_SIZE and FIFO_ELEM_SIZE; with others set, or another UCX release
// loaded (Verified), it stays off. Elsewhere a Watcher does nothing.
package smfifo

import "github.com/ucxnet/ucxnet/internal/ucxconf"

// Verified reports whether the repair is known to work with the UCX
// release named (as "1.13.1"): it was verified with UCX 1.13 (Debian
// 12's). The FIFO layout is the same up to 1.22, but with 1.16 and 1.22
// the process stayed deaf after a repair, so it stays off there until the
// difference is understood.
func Verified(release string) bool {
	maj, min, ok := ucxconf.MajorMinor(release)
	return ok && maj == 1 && min == 13
}
