package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/registry"
)

// benchChild is a running child process of bench: its server
// (bench-server) or a client of the requests after idle (bench-idle).
type benchChild struct {
	name  string // the hidden command it runs
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
	rest, err := c.ask("rusage", "rusage", 10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	return parseRusage(rest)
}

// ask sends the command line cmd and returns what follows "answer " in
// the child's reply line. The child has timeout to answer.
func (c *benchChild) ask(cmd, answer string, timeout time.Duration) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	word, _, _ := strings.Cut(cmd, " ")
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return "", fmt.Errorf("asking the %s process for %s: %w", c.name, word, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			return "", fmt.Errorf("%s process exited: %v", c.name, c.err)
		}
		rest, ok := strings.CutPrefix(line, answer+" ")
		if !ok {
			return "", fmt.Errorf("%s process answered %q to %s", c.name, truncate(line, 80), word)
		}
		return rest, nil
	case <-t.C:
		return "", fmt.Errorf("%s process did not answer %s in %v", c.name, word, timeout)
	}
}

// startBenchServer re-executes this program as bench-server, serving
// transports, and waits for its "ready" line.
func startBenchServer(ctx context.Context, sio *stdio, spec, dir string, transports []string) (*benchChild, error) {
	c, ready, err := startChild(ctx, sio, spec, benchServerCmd.Name, "--transports", strings.Join(transports, ","), "--dir", dir)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(ready), &c.addrs); err != nil {
		c.kill()
		<-c.done
		return nil, fmt.Errorf("server's ready line %q: %v", truncate(ready, 80), err)
	}
	return c, nil
}

// startChild re-executes this program as the hidden command cmd with args,
// the registry spec in its environment (none when empty), and waits for
// its "ready" line; it returns what follows "ready ".
func startChild(ctx context.Context, sio *stdio, spec, cmdName string, args ...string) (*benchChild, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("finding own executable: %w", err)
	}
	cmd := exec.Command(exe, append([]string{cmdName}, args...)...)
	cmd.Env = os.Environ()
	if spec != "" {
		cmd.Env = append(cmd.Env, registry.EnvRegistry+"="+spec)
	}
	cmd.Stderr = sio.Err
	cmd.WaitDelay = time.Second
	setChildAttrs(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting the %s process: %w", cmdName, err)
	}
	c := &benchChild{name: cmdName, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
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
	fail := func(err error) (*benchChild, string, error) {
		c.kill()
		<-c.done
		return nil, "", err
	}
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			return nil, "", fmt.Errorf("%s process exited before it was ready: %v", cmdName, c.err)
		}
		ready, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			return fail(fmt.Errorf("%s process said %q, want ready", cmdName, truncate(line, 80)))
		}
		return c, ready, nil
	case <-timeout.C:
		return fail(fmt.Errorf("%s process not ready after 20s", cmdName))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}
