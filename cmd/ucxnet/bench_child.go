package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/registry"
)

// benchChild is the running bench-server process.
type benchChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its stdout, line by line
	addrs map[string]map[string]string
	done  chan struct{}
	err   error
	once  sync.Once
	mu    sync.Mutex // one command at a time
}

// kill kills the child at once.
func (c *benchChild) kill() { c.cmd.Process.Kill() }

// stop ends the child: EOF on its stdin asks it to exit, a kill follows
// after a second.
func (c *benchChild) stop() {
	c.once.Do(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// rusage asks the child for its CPU time so far.
func (c *benchChild) rusage() (user, sys time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.stdin, "rusage\n"); err != nil {
		return 0, 0, fmt.Errorf("asking the server for its rusage: %w", err)
	}
	select {
	case line, ok := <-c.lines:
		if !ok {
			return 0, 0, fmt.Errorf("server process exited: %v", c.err)
		}
		rest, ok := strings.CutPrefix(line, "rusage ")
		if !ok {
			return 0, 0, fmt.Errorf("server answered %q to rusage", truncate(line, 80))
		}
		return parseRusage(rest)
	case <-time.After(10 * time.Second):
		return 0, 0, errors.New("server did not answer the rusage request in 10s")
	}
}

// startBenchServer re-executes this program as bench-server and waits for
// its "ready" line.
func startBenchServer(ctx context.Context, sio *stdio, spec, dir string, transports []string) (*benchChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding own executable: %w", err)
	}
	cmd := exec.Command(exe, benchServerCmd.Name, "--transports", strings.Join(transports, ","), "--dir", dir)
	cmd.Env = append(os.Environ(), registry.EnvRegistry+"="+spec)
	cmd.Stderr = sio.Err
	cmd.WaitDelay = time.Second
	setChildAttrs(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server process: %w", err)
	}
	c := &benchChild{cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	go func() {
		err := cmd.Wait()
		c.err = err
		close(c.done)
	}()
	fail := func(err error) (*benchChild, error) {
		c.kill()
		<-c.done
		return nil, err
	}
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			return nil, fmt.Errorf("server process exited before it was ready: %v", c.err)
		}
		js, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			return fail(fmt.Errorf("server process said %q, want ready", line))
		}
		if err := json.Unmarshal([]byte(js), &c.addrs); err != nil {
			return fail(fmt.Errorf("server's ready line %q: %v", line, err))
		}
		return c, nil
	case <-timeout.C:
		return fail(errors.New("server process not ready after 20s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}
