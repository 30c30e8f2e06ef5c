// Package statsock serves one JSON document, read-only, on a Unix socket
// to processes of this user (or root): ucxnet's stats sockets, which
// `ucxnet ls` reads.
//
// The socket's directory is the user's (mode 0700, CheckDir), the socket
// mode 0600, and the server answers only its own user (or root), checked
// on each connection (PeerCred). The protocol is one request line,
// answered with one JSON document and the end of the connection. It
// serves on Linux only, where PeerCred tells who is at the other end.
package statsock

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MaxPath is the longest path a Unix socket binds to (sun_path, less its
// terminating zero).
const MaxPath = 107

// answerTimeout bounds one connection (request and answer). A variable
// for tests.
var answerTimeout = 2 * time.Second

// maxClients bounds the connections served at once; more are closed
// unanswered.
const maxClients = 4

// Server serves a document on one socket.
type Server struct {
	ln      *net.UnixListener
	path    string
	request string     // the request line, "\n" included
	doc     func() any // the document, marshalled with encoding/json
	sem     chan struct{}
	done    chan struct{}  // closed when serve returns
	wg      sync.WaitGroup // the answers in progress

	mu    sync.Mutex
	conns map[*net.UnixConn]struct{} // the connections being answered
}

// Listen binds a socket at path (longest MaxPath), mode 0600, and serves
// on it: a connection from this user or root that sends the line request
// gets doc() as JSON; one that sends another line gets a JSON error. It
// fails where Supported is false.
func Listen(path, request string, doc func() any) (*Server, error) {
	if !Supported {
		return nil, errors.ErrUnsupported
	}
	if len(path) > MaxPath {
		return nil, fmt.Errorf("socket path %s longer than %d bytes", path, MaxPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{ln: ln, path: path, request: request, doc: doc, sem: make(chan struct{}, maxClients),
		done: make(chan struct{}), conns: make(map[*net.UnixConn]struct{})}
	go s.serve()
	return s, nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops serving, removes the socket and ends the connections being
// answered: a client that sends nothing does not hold it up. Close of a
// nil Server does nothing.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.ln.Close() // unlinks the socket
	<-s.done     // no connection is added after this
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) serve() {
	defer close(s.done)
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: don't spin
			continue
		}
		select {
		case s.sem <- struct{}{}:
			s.wg.Add(1)
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			go func() {
				defer s.wg.Done()
				defer func() { <-s.sem }()
				s.answer(c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		default:
			c.Close() // too many at once
		}
	}
}

// answer serves one connection: only this user's (or root's) request line
// gets the document.
func (s *Server) answer(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(answerTimeout))
	if uid, _, err := PeerCred(c); err != nil || uid != os.Geteuid() && uid != 0 {
		return
	}
	line, err := bufio.NewReaderSize(c, 64).ReadString('\n')
	if err != nil || line != s.request {
		_, _ = fmt.Fprintf(c, "{\"error\":%q}\n", "want "+strings.TrimSpace(s.request))
		return
	}
	_ = json.NewEncoder(c).Encode(s.doc())
}

// CheckDir creates dir (mode 0700) if it is missing and checks that it is
// a directory, not a symbolic link, owned by this user and not writable by
// group or others; it sets mode 0700 if they may read it.
func CheckDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("stats directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("stats directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("stats directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("stats directory %s is not a directory (mode %s)", dir, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("stats directory %s is owned by uid %d, not %d", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("stats directory %s has mode %#o: group or others may write to it", dir, fi.Mode().Perm())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("stats directory: %w", err)
		}
	}
	return nil
}
