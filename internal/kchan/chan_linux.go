//go:build linux

package kchan

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of a channel's server.
const (
	// HandshakeTimeout bounds a handshake, each way.
	HandshakeTimeout = 2 * time.Second
	// MaxPending bounds the handshakes a server runs at once; a dialer
	// beyond it is closed unanswered.
	MaxPending = 32
)

// ErrUnsupported means the platform has no kernel channel (not Linux).
var ErrUnsupported = errors.New("kchan: unsupported on this platform")

// Cred is a channel peer's identity as the kernel saw it at connect time
// (SO_PEERCRED). PID is 0 when the peer's process is not visible in this
// process's pid namespace.
type Cred struct {
	PID      int32
	UID, GID uint32
}

// Chan is one end of an established channel.
type Chan struct {
	c     *net.UnixConn
	Cred  Cred  // the other side, from the kernel
	Hello Hello // what the other side said it is
	local atomic.Bool
	once  sync.Once
}

// End says how a channel ended.
type End int

// The ends.
const (
	Died   End = iota // EOF or an error without Closing first: the peer's process is gone (or broke the protocol)
	Closed            // the peer sent Closing, then closed
	Local             // this side closed it
)

// Watch blocks until the channel ends and says how. It holds one blocked
// Read, which costs a parked goroutine and no thread: at one channel per
// peer Transport on this host, that is the netpoller's own scale.
func (ch *Chan) Watch() End {
	var b [1]byte
	closing := false
	for {
		n, err := ch.c.Read(b[:])
		switch {
		case ch.local.Load():
			return Local
		case err != nil:
			if closing {
				return Closed
			}
			return Died
		case n == 1 && b[0] == Closing:
			closing = true
		case n == 1:
			ch.Close(false) // not the protocol
			return Died
		}
	}
}

// Close closes the channel once; announce first tells the other side
// that the close is on purpose (Closing), within a short bound.
func (ch *Chan) Close(announce bool) {
	ch.once.Do(func() {
		ch.local.Store(true)
		if announce {
			_ = ch.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = ch.c.Write([]byte{Closing})
		}
		_ = ch.c.Close()
	})
}

// Dial connects to the channel name and runs the dialer's handshake:
// self goes first, then the listener's Hello is read. It fails at once
// when nothing listens on name (another host, or no such Transport).
func Dial(ctx context.Context, name string, self Hello) (*Chan, error) {
	out, err := self.Marshal()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", name)
	if err != nil {
		return nil, err
	}
	uc := nc.(*net.UnixConn)
	dl, _ := ctx.Deadline()
	_ = uc.SetDeadline(dl)
	ch, err := handshake(uc, out, true)
	if err != nil {
		_ = uc.Close()
		return nil, err
	}
	_ = uc.SetDeadline(time.Time{})
	return ch, nil
}

// handshake exchanges Hellos on uc (out is ours, marshalled; the dialer
// writes first) and reads the peer's credentials.
func handshake(uc *net.UnixConn, out []byte, dialer bool) (*Chan, error) {
	ch := &Chan{c: uc}
	var err error
	if ch.Cred, err = peerCred(uc); err != nil {
		return nil, err
	}
	if dialer {
		if _, err := uc.Write(out); err != nil {
			return nil, err
		}
	}
	if ch.Hello, err = readHello(uc); err != nil {
		return nil, err
	}
	return ch, nil
}

// readHello reads one Hello frame.
func readHello(r io.Reader) (Hello, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Hello{}, err
	}
	n, err := frameLen(head[:])
	if err != nil {
		return Hello{}, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return Hello{}, err
	}
	return ParseHello(body)
}

// peerCred reads SO_PEERCRED off uc.
func peerCred(uc *net.UnixConn) (Cred, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, err
	}
	if cerr != nil {
		return Cred{}, cerr
	}
	return Cred{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}

// Server accepts a Transport's channels on its names.
type Server struct {
	lns     []*net.UnixListener
	out     []byte // our Hello, marshalled
	admit   func(*Chan) bool
	ended   func(*Chan, End)
	pending chan struct{} // one token per handshake running
	mu      sync.Mutex
	hs      map[*net.UnixConn]struct{} // handshakes running
	closed  bool
	wg      sync.WaitGroup
}

// Listen listens on names and answers each dialer with self. admit is
// called with a dialer's channel once its Hello is read and before it is
// answered: it returns false to close it unanswered, or takes the channel
// over: it is answered once admit returns, then watched (Chan.Watch) on
// the goroutine that served it, and ended is called with how it ended.
// A channel's owner ends it with Chan.Close. Names already bound (by
// another process: squatted) are returned in taken; the others are
// listened on. It fails only if no name could be bound for another
// reason.
func Listen(names []string, self Hello, admit func(*Chan) bool, ended func(*Chan, End)) (s *Server, taken []string, err error) {
	out, err := self.Marshal()
	if err != nil {
		return nil, nil, err
	}
	s = &Server{out: out, admit: admit, ended: ended, pending: make(chan struct{}, MaxPending), hs: make(map[*net.UnixConn]struct{})}
	for _, name := range names {
		ln, lerr := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
		if errors.Is(lerr, syscall.EADDRINUSE) {
			taken = append(taken, name)
			continue
		}
		if lerr != nil {
			s.Close()
			return nil, taken, lerr
		}
		s.lns = append(s.lns, ln)
	}
	for _, ln := range s.lns {
		s.wg.Add(1)
		go s.acceptLoop(ln)
	}
	return s, taken, nil
}

// acceptLoop accepts dialers on ln until it is closed. A dialer beyond
// MaxPending handshakes is closed at once.
func (s *Server) acceptLoop(ln *net.UnixListener) {
	defer s.wg.Done()
	for {
		uc, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		select {
		case s.pending <- struct{}{}:
		default:
			_ = uc.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			<-s.pending
			_ = uc.Close()
			return
		}
		s.hs[uc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(uc)
	}
}

// serve runs a dialer's handshake under HandshakeTimeout, then watches
// the channel if it was admitted.
func (s *Server) serve(uc *net.UnixConn) {
	ch, admitted, ok := s.answer(uc)
	s.wg.Done()
	switch {
	case ok:
		s.ended(ch, ch.Watch())
	case admitted && ch.local.Load():
		s.ended(ch, Local)
	case admitted:
		s.ended(ch, Died) // gone before it was answered
	}
}

// answer runs a dialer's handshake under HandshakeTimeout and reports
// whether its channel was admitted, and answered.
func (s *Server) answer(uc *net.UnixConn) (ch *Chan, admitted, ok bool) {
	_ = uc.SetDeadline(time.Now().Add(HandshakeTimeout))
	ch, err := handshake(uc, nil, false)
	admitted = err == nil && s.admit(ch)
	ok = admitted
	if ok {
		_, err = uc.Write(s.out)
		ok = err == nil
	}
	s.mu.Lock()
	delete(s.hs, uc)
	s.mu.Unlock()
	<-s.pending
	if !ok {
		if ch != nil {
			ch.Close(false)
		} else {
			_ = uc.Close()
		}
		return ch, admitted, false
	}
	_ = uc.SetDeadline(time.Time{})
	return ch, true, true
}

// Close stops listening and ends the handshakes still running; the
// channels admit took over are the caller's to close (their watches end
// then).
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for uc := range s.hs {
		_ = uc.Close()
	}
	s.mu.Unlock()
	for _, ln := range s.lns {
		_ = ln.Close()
	}
	s.wg.Wait()
}

// IPCNamespace is the inode of this process's IPC namespace, 0 if it
// cannot be read.
func IPCNamespace() uint64 {
	fi, err := os.Stat("/proc/self/ns/ipc")
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
