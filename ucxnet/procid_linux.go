//go:build linux

package ucxnet

// A peer stopped in a debugger (a breakpoint, SIGSTOP) answers no PING,
// and keepalive would take it for dead, where TCP conns survive the stop.
// Each Hello therefore names its sender's process (stream.ProcID), and a
// peer that keepalive would fail is kept if that names a process this one
// can see stopped: same boot, same pid namespace, same start time, owned
// by this process's effective user, and in state 't' or 'T'. It is looked
// at again each KeepAlive while it stays silent.
//
// A peer may lie in its Hello. Claiming a stopped process keeps its conns
// as answering PINGs (or sending any frame) would; but a CONNECT's
// endpoint is made from an address that may not be the sender's, and only
// keepalive fails those (admit.go): so the stopped process must be this
// user's (another user cannot stop it, and this user can already do
// anything to this process), and at most maxStoppedPerProc peers may
// claim one process. While a peer is found stopped, smWatch repairs no
// shared-memory FIFO slot (smfifo_linux.go): the stuck one may be that
// peer's, half written.

import (
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ucxnet/ucxnet/internal/procstat"
	"github.com/ucxnet/ucxnet/internal/stream"
)

// maxStoppedPerProc bounds the peers kept alive for one stopped process:
// one per Transport it runs.
const maxStoppedPerProc = 8

// selfProc returns this process's identity for its Hellos; the zero ProcID
// where /proc does not give all of it. A variable, so that a test's child
// process can hide it.
var selfProc = sync.OnceValue(func() stream.ProcID {
	st, err := procstat.Read(os.Getpid())
	if err != nil {
		return stream.ProcID{}
	}
	ns, boot, ok := hostNamespace()
	if !ok {
		return stream.ProcID{}
	}
	return stream.ProcID{PID: uint32(os.Getpid()), Start: st.Start, PidNS: ns, Boot: boot}
})

// hostNamespace reads this process's pid namespace (its inode) and the
// host's boot id.
func hostNamespace() (pidNS uint64, boot [16]byte, ok bool) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || !strings.HasPrefix(link, "pid:[") || !strings.HasSuffix(link, "]") {
		return 0, boot, false
	}
	pidNS, err = strconv.ParseUint(link[len("pid:["):len(link)-1], 10, 64)
	if err != nil {
		return 0, boot, false
	}
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0, boot, false
	}
	b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(id)), "-", ""))
	if err != nil || len(b) != len(boot) {
		return 0, boot, false
	}
	copy(boot[:], b)
	return pidNS, boot, true
}

// procStopped reports whether id names a process stopped or traced on
// this host, in this pid namespace, owned by this process's effective user.
func procStopped(id stream.ProcID) bool {
	state, ok := procState(id)
	return ok && stoppedState(state)
}

// stoppedState reports whether a /proc state is a stop (SIGSTOP: 'T') or
// a tracing stop (a debugger: 't').
func stoppedState(s byte) bool { return s == 't' || s == 'T' }

// procState returns the state of the process id names, if it is on this
// host, in this pid namespace, owned by this process's effective user and
// started when id says (ok false otherwise, or for this process).
func procState(id stream.ProcID) (state byte, ok bool) {
	self := selfProc()
	if id.PID == 0 || self.PID == 0 || id.Boot != self.Boot || id.PidNS != self.PidNS || id.PID == self.PID {
		return 0, false
	}
	pid := int(id.PID)
	var fi unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid), &fi) != nil || fi.Uid != uint32(os.Geteuid()) {
		return 0, false
	}
	st, err := procstat.Read(pid)
	if err != nil || st.Start != id.Start {
		return 0, false
	}
	return st.State, true
}

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
		for _, q := range t.peers {
			if q.proc == id {
				claims++
			}
		}
	}
	t.mu.RUnlock()
	if claims == 0 || claims > maxStoppedPerProc {
		return false
	}
	state, ok := procState(id)
	switch at := p.stoppedAt.Load(); {
	case ok && stoppedState(state):
		p.stoppedAt.Store(now)
	case ok && state != 'Z' && state != 'X' && at != 0 && now-at <= int64(2*ka):
		p.stoppedAt.Store(0) // resumed: spared once
	default:
		return false
	}
	p.lastRecv.Store(now)
	t.stats.keepAliveStopped.Add(1)
	smWatch.noteStoppedPeer(time.Unix(0, now).Add(2 * ka))
	return true
}
