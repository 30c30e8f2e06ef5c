package session

// A peer stopped in a debugger (a breakpoint, SIGSTOP) answers no PING,
// and keepalive would take it for dead, where TCP conns survive the stop.
// Each Hello therefore names its sender's process (stream.ProcID), and a
// peer that keepalive would fail is kept if that names a process this one
// can see stopped (Linux): same boot, same pid namespace, same start time,
// owned by this process's effective user, and in state 't' or 'T'. It is
// looked at again each KeepAlive while it stays silent.
//
// A peer may lie in its Hello. Claiming a stopped process keeps its conns
// as answering PINGs (or sending any frame) would; but a CONNECT's
// endpoint is made from an address that may not be the sender's, and only
// keepalive fails those (admit.go): so the stopped process must be this
// user's (another user cannot stop it, and this user can already do
// anything to this process), and at most maxStoppedPerProc peers may
// claim one process. While a peer is found stopped, smWatch repairs no
// shared-memory FIFO slot: the stuck one may be that
// peer's, half written.

import (
	"time"

	"github.com/ucxnet/ucxnet/internal/procstat"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// maxStoppedPerProc bounds the peers kept alive for one stopped process:
// one per Transport it runs.
const maxStoppedPerProc = 8

// selfProc returns this process's identity for its Hellos. A variable, so
// that a test's child process can hide it.
var selfProc = procstat.Self

// keepStopped reports whether keepalive should spare p, silent too long,
// because its process is stopped (see above), or runs again after a
// check found it stopped: a PING sent while it was stopped may find it
// resumed only just before this check, so once after a stop it gets a
// full KeepAlive to answer a fresh one. Either counts as a sign of life
// now, so that it is looked at again a KeepAlive later.
func (t *Transport) keepStopped(p *peer, now int64) bool {
	t.mu.RLock()
	id, ka, claims := p.proc, p.ka, 0
	if id != (stream.ProcID{}) {
		for _, q := range t.allPeersLocked() {
			if q.proc == id {
				claims++
			}
		}
	}
	t.mu.RUnlock()
	if claims == 0 || claims > maxStoppedPerProc {
		return false
	}
	state, ok := procstat.StateOf(id)
	switch at := p.stoppedAt.Load(); {
	case ok && procstat.Stopped(state):
		p.stoppedAt.Store(now)
	case ok && state != 'Z' && state != 'X' && at != 0 && now-at <= int64(2*ka):
		p.stoppedAt.Store(0) // resumed: spared once
	default:
		return false
	}
	p.lastRecv.Store(now)
	t.stats.keepAliveStopped.Add(1)
	smWatch().NoteStoppedPeer(time.Unix(0, now).Add(2 * ka))
	return true
}
