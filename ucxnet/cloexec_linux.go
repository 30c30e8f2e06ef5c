//go:build linux

package ucxnet

// UCX creates its sockets, epoll instances and timerfds without
// close-on-exec (up to 1.22 only its eventfds have it); Go sets it on every
// descriptor of its own. A child the application execs (os/exec) would
// inherit UCX's tcp sockets and keep them open after this process dies, so
// that its peers learn of the death only from keepalive (about 1.3 s
// instead of milliseconds over tcp), and it would hold UCX's epoll and
// listening sockets for as long as it lives.
//
// fdSweep marks FD_CLOEXEC on every descriptor above 2 that lacks it and is
// a socket or an epoll, eventfd or timerfd instance: it reads
// /proc/self/fd, asks F_GETFD of each descriptor, and looks closer (fstat,
// readlink) only at the rare ones without the flag. It sweeps when a
// worker is created, after each endpoint is made (a dial, a CONNECT) and
// when an ACCEPT arrives (UCX's async thread accepts tcp connections on its
// own), before the dial or the Accept returns; and, since UCX makes more
// sockets while it wires the endpoint up (in progress, or on its async
// thread), at each engine tick (100 ms) for a second after such a request.
// Sweeps are spaced by 50 times the last one's cost (at most 2% of a
// core); a request that comes sooner waits for a tick.
// EnvNoCloexec turns it off.

import (
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cloexecSweeper throttles and runs the close-on-exec sweeps of the process
// (one for all Transports: descriptors are per process).
type cloexecSweeper struct {
	mu     sync.Mutex
	off    bool
	until  time.Time     // ticks sweep until then
	last   time.Time     // when the last sweep started
	cost   time.Duration // how long it took
	buf    []byte        // getdents buffer
	marked uint64        // descriptors marked so far
}

var fdSweep = &cloexecSweeper{off: noCloexec()}

// sweepSpacing is how many times a sweep's cost the next one waits;
// sweepTicks is how long after a request the engine ticks sweep.
const (
	sweepSpacing = 50
	sweepTicks   = time.Second
)

// request asks for a sweep now, unless the last one was too recent, and at
// the ticks of the next sweepTicks.
func (s *cloexecSweeper) request() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return
	}
	now := time.Now()
	s.until = now.Add(sweepTicks)
	if now.Sub(s.last) >= s.cost*sweepSpacing {
		s.sweepLocked(now)
	}
}

// tick sweeps if a request asked for it and the last sweep is far enough
// back (engine goroutine).
func (s *cloexecSweeper) tick(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.until) && now.Sub(s.last) >= s.cost*sweepSpacing {
		s.sweepLocked(now)
	}
}

// sweepLocked runs one sweep and records its cost. s.mu is held.
func (s *cloexecSweeper) sweepLocked(start time.Time) {
	if s.buf == nil {
		s.buf = make([]byte, 16<<10)
	}
	s.marked += uint64(markCloexec(s.buf))
	s.last = start
	s.cost = time.Since(start)
}

// markedCount returns how many descriptors the sweeps marked.
func (s *cloexecSweeper) markedCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marked
}

// markCloexec marks FD_CLOEXEC on each descriptor above 2 that lacks it and
// inheritable says UCX would leave open across exec; it returns how many
// it marked. buf is scratch space for the directory entries.
func markCloexec(buf []byte) int {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(dir)
	marked := 0
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil || n <= 0 {
			return marked
		}
		for off := 0; off+19 <= n; {
			// struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return marked
			}
			fd, ok := direntFD(buf[off+19 : off+reclen])
			off += reclen
			if !ok || fd <= 2 || fd == dir {
				continue
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC != 0 || !inheritable(fd) {
				continue
			}
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err == nil {
				marked++
			}
		}
	}
}

// direntFD parses a /proc/self/fd entry's NUL-terminated name.
func direntFD(name []byte) (int, bool) {
	fd := 0
	for i, b := range name {
		switch {
		case b == 0:
			return fd, i > 0
		case b < '0' || b > '9' || i > 9:
			return 0, false
		}
		fd = fd*10 + int(b-'0')
	}
	return fd, len(name) > 0
}

// inheritable reports whether fd is of a kind UCX creates without
// close-on-exec and the sweep marks: a socket, or an epoll, eventfd or
// timerfd instance. Pipes and files are left alone: an application may
// mean a child to inherit those, and UCX's do not keep a peer from seeing
// this process die.
func inheritable(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		return true
	}
	var link [32]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), link[:])
	if err != nil {
		return false
	}
	switch string(link[:n]) {
	case "anon_inode:[eventpoll]", "anon_inode:[eventfd]", "anon_inode:[timerfd]":
		return true
	}
	return false
}
