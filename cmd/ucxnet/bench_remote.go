package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// benchPeer is the server side of a bench run: bench's child process, or a
// "bench --serve" server elsewhere.
type benchPeer interface {
	// rusage returns the server process's CPU time so far.
	rusage() (user, sys time.Duration, err error)
}

// benchRemote is a "bench --serve" server reached through its control
// conn.
type benchRemote struct {
	mu    sync.Mutex // one command at a time
	c     net.Conn
	sc    *bufio.Scanner
	addrs map[string]map[string]string
}

// benchMaxLine bounds a line from the server: it is a peer like any other.
const benchMaxLine = 64 << 10

// dialBenchRemote dials the control listener name and asks for the
// server's addresses.
func dialBenchRemote(ctx context.Context, ut *ucxnet.Transport, name string, transports []string) (*benchRemote, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := (&ucxnet.Dialer{Transport: ut}).DialContext(dctx, "ucx", name)
	if err != nil {
		return nil, fmt.Errorf("dialing the bench server %s: %w", name, err)
	}
	r := &benchRemote{c: c, sc: bufio.NewScanner(c)}
	r.sc.Buffer(make([]byte, 4096), benchMaxLine)
	js, err := r.ask("addrs")
	if err != nil {
		c.Close()
		return nil, err
	}
	if r.addrs, err = parseBenchAddrs(js, transports); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench server %s: %w", name, err)
	}
	return r, nil
}

// ask sends cmd and returns the rest of the answer line, which must start
// with cmd.
func (r *benchRemote) ask(cmd string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	defer r.c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(r.c, "%s\n", cmd); err != nil {
		return "", fmt.Errorf("asking the bench server for %s: %w", cmd, err)
	}
	if !r.sc.Scan() {
		err := r.sc.Err()
		if err == nil {
			err = errors.New("server closed the conn")
		}
		return "", fmt.Errorf("bench server's answer to %s: %w", cmd, err)
	}
	rest, ok := strings.CutPrefix(r.sc.Text(), cmd+" ")
	if !ok {
		return "", fmt.Errorf("bench server answered %q to %s", truncate(r.sc.Text(), 80), cmd)
	}
	return rest, nil
}

func (r *benchRemote) rusage() (user, sys time.Duration, err error) {
	s, err := r.ask("rusage")
	if err != nil {
		return 0, 0, err
	}
	return parseRusage(s)
}

func (r *benchRemote) close() { r.c.Close() }

// parseRusage parses "USER_US SYS_US", two non-negative microsecond counts.
func parseRusage(s string) (user, sys time.Duration, err error) {
	var u, sy int64
	if n, err := fmt.Sscanf(s, "%d %d", &u, &sy); err != nil || n != 2 || u < 0 || sy < 0 || u > 1<<50 || sy > 1<<50 {
		return 0, 0, fmt.Errorf("server's rusage answer %q is not two microsecond counts", truncate(s, 80))
	}
	return time.Duration(u) * time.Microsecond, time.Duration(sy) * time.Microsecond, nil
}

// parseBenchAddrs checks a server's address map: every transport of want
// with every service, ucx names as the registry takes them, and TCP
// addresses as host:port.
func parseBenchAddrs(js string, want []string) (map[string]map[string]string, error) {
	var m map[string]map[string]string
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return nil, fmt.Errorf("its address list is not JSON: %v", err)
	}
	for _, tr := range want {
		svcs, ok := m[tr]
		if !ok {
			return nil, fmt.Errorf("it does not serve %s (start it with --transports including %s)", tr, tr)
		}
		for _, svc := range benchServices {
			a := svcs[svc]
			var err error
			switch tr {
			case "ucx":
				if a == "" || len(a) > 255 || strings.ContainsAny(a, "/\x00\n") {
					err = errors.New("not a name")
				}
			case "tcp":
				_, _, err = net.SplitHostPort(a)
			default:
				err = errors.New("not served remotely")
			}
			if err != nil {
				return nil, fmt.Errorf("its %s %s address %q: %v", tr, svc, truncate(a, 80), err)
			}
		}
	}
	return m, nil
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
