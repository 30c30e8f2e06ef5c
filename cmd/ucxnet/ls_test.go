package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// lsEnv runs the binary with a private registry and stats directory.
func lsEnv(t *testing.T, reg, stats string, timeout time.Duration, args ...string) result {
	t.Helper()
	t.Setenv(ucxnet.EnvStatsDir, stats)
	return runBin(t, reg, nil, timeout, args...)
}

// The done-when of `ucxnet ls`: while `ucxnet demo --hold` runs, ls shows
// both of its processes with their conns and lanes, as a table and as
// JSON; `ss` is the same command. The demo runs on the lane ucxnet picks,
// and again on the kernel-TCP lane.
func TestLsDemo(t *testing.T) {
	for _, lane := range []string{ucxnet.LaneAuto, ucxnet.LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			t.Setenv(ucxnet.EnvLane, lane)
			testLsDemo(t, lane)
		})
	}
}

func testLsDemo(t *testing.T, lane string) {
	reg, stats := t.TempDir(), t.TempDir()
	t.Setenv(ucxnet.EnvStatsDir, stats)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	demo := binCommand(ctx, t, reg, "demo", "--rr", "10", "--download", "1", "--echo", "1", "--hold", "2m")
	var out lockedBuffer
	demo.Stdout, demo.Stderr = &out, &out
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		demo.Process.Signal(os.Interrupt) // ends the hold: the demo cleans up and exits
		if err := demo.Wait(); err != nil {
			t.Errorf("demo: %v\n%s", err, out.String())
		}
	}()

	// Once the demo holds, its conns are established (before, ls may see
	// the client's first dial still waiting for its ACCEPT, with no conn
	// id for its remote end yet) and idle.
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), "holding both processes") {
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not reach its hold:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	var snaps []ucxnet.Snapshot
	for {
		r := runBin(t, reg, nil, 20*time.Second, "ls", "--json")
		snaps = nil
		if r.code == 0 {
			if err := json.Unmarshal([]byte(r.stdout), &snaps); err != nil {
				t.Fatalf("ls --json: %v\n%s", err, r.stdout)
			}
		}
		if len(snaps) == 2 && len(snaps[0].Conns) > 0 && len(snaps[1].Conns) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ls --json never showed both demo processes with conns: exit %d\n%s\nstderr:\n%s\ndemo:\n%s", r.code, r.stdout, r.stderr, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	listening := -1
	for i, s := range snaps {
		if len(s.Listeners) == 1 && strings.HasPrefix(s.Listeners[0], "demo-") {
			listening = i
		}
		for _, c := range s.Conns {
			if c.Lane != ucxnet.LaneUCX && c.Lane != ucxnet.LaneTCP || c.LaneReason == "" || c.State == "" {
				t.Errorf("conn without lane, reason or state: %+v", c)
			}
		}
	}
	if listening < 0 || snaps[0].PID == snaps[1].PID {
		t.Fatalf("want the demo server (listening) and its client, got %+v", snaps)
	}
	server, client := snaps[listening], snaps[1-listening]
	if lane == ucxnet.LaneTCP && (client.Conns[0].Lane != lane || server.Conns[0].Lane != lane) {
		t.Errorf("conns on lanes %s and %s with %s=%s", client.Conns[0].Lane, server.Conns[0].Lane, ucxnet.EnvLane, lane)
	}
	var peerConn *ucxnet.ConnStats // the server's end of the client's oldest conn
	for i, c := range server.Conns {
		if c.Local == client.Conns[0].Remote {
			peerConn = &server.Conns[i]
		}
	}
	if peerConn == nil {
		t.Fatalf("the client conn's remote %s is no server conn's local: %+v", client.Conns[0].Remote, server.Conns)
	}

	for _, cmd := range []string{"ls", "ss"} {
		r := runBin(t, reg, nil, 20*time.Second, cmd)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", cmd, r.code, r.stderr)
		}
		for _, want := range []string{
			fmt.Sprintf("pid %d ", server.PID), fmt.Sprintf("pid %d ", client.PID),
			"listens " + server.Listeners[0], "LANE", client.Conns[0].Lane + " ", client.Conns[0].LaneReason,
			peerConn.Local,
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s output lacks %q:\n%s", cmd, want, r.stdout)
			}
		}
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// leaveSocket leaves a socket file nobody listens on at path.
func leaveSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

// ls removes the stats sockets of processes that are gone and the stale
// registry entries, and leaves live entries alone.
func TestLsRemovesStale(t *testing.T) {
	reg, stats := t.TempDir(), t.TempDir()
	dead := deadPID(t)
	sock := filepath.Join(stats, fmt.Sprintf("%d-0123456789abcdef.sock", dead))
	leaveSocket(t, sock)
	// A live pid whose socket nobody listens on any more (a process of
	// another pid namespace, whose pid here names another process): stale
	// once older than a second.
	sock1 := filepath.Join(stats, "1-0123456789abcdef.sock")
	leaveSocket(t, sock1)
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(sock1, old, old); err != nil {
		t.Fatal(err)
	}
	// A fresh one may be between its bind and its listen: kept.
	fresh := filepath.Join(stats, fmt.Sprintf("%d-fresh.sock", os.Getpid()))
	leaveSocket(t, fresh)

	host, _ := os.Hostname()
	d, err := registry.NewDir(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Register(ctx, registry.Entry{Name: "live-one", Address: []byte{1}, PID: os.Getpid(), Host: host}); err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(registry.Entry{Name: "stale-one", Address: []byte{1}, PID: dead, Host: host})
	if err := os.WriteFile(filepath.Join(reg, "stale-one.entry"), stale, 0o600); err != nil {
		t.Fatal(err)
	}

	r := lsEnv(t, reg, stats, 20*time.Second, "ls")
	if r.code != 0 {
		t.Fatalf("ls: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"removed 2 stats sockets of processes that are gone", "removed stale registry entry stale-one"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("ls stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, p := range []string{sock, sock1} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("stale socket %s is still there: %v", p, err)
		}
	}
	if _, err := os.Lstat(fresh); err != nil {
		t.Errorf("the fresh socket went: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(reg, "stale-one.entry")); !os.IsNotExist(err) {
		t.Errorf("the stale entry is still there: %v", err)
	}
	if _, err := d.Resolve(ctx, "live-one"); err != nil {
		t.Errorf("the live entry went: %v", err)
	}
	if !strings.Contains(r.stdout, "no ucxnet transports") {
		t.Errorf("ls stdout:\n%s", r.stdout)
	}
}

// A stats socket that answers garbage, too much, or nothing gets a clear
// error (exit 1); ls does not hang or take it for a snapshot.
func TestLsHostileAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(c net.Conn)
		want   string
	}{
		{"garbage", func(c net.Conn) { c.Write([]byte("\x1b[2Jnot json at all")) }, "not a stats answer"},
		{"huge", func(c net.Conn) {
			chunk := bytes.Repeat([]byte(" "), 1<<20)
			for i := 0; i < 20; i++ {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}, "answer larger than 16 MiB"},
		{"wrong pid", func(c net.Conn) { fmt.Fprintf(c, `{"pid":1,"transport":"x"}`) }, "not a stats answer: pid 1"},
		{"silent", func(c net.Conn) { time.Sleep(3 * time.Second) }, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, stats := t.TempDir(), t.TempDir()
			path := filepath.Join(stats, fmt.Sprintf("%d-%s.sock", os.Getpid(), "hostile"))
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						c.SetDeadline(time.Now().Add(10 * time.Second))
						if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
							return
						}
						tc.answer(c)
					}()
				}
			}()
			r := lsEnv(t, reg, stats, 20*time.Second, "ls", "--timeout", "1s")
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, path) {
				t.Errorf("ls: exit %d (want 1), stderr lacks %q:\n%s", r.code, tc.want, r.stderr)
			}
			if _, err := os.Lstat(path); err != nil {
				t.Errorf("a live process's socket was removed: %v", err)
			}
		})
	}
}

// A transport serves its stats socket in the stats directory, mode 0600,
// and removes it on Close; UCXNET_STATS_DIR=off serves none.
func TestStatsSocketLifecycle(t *testing.T) {
	stats := t.TempDir()
	t.Setenv(ucxnet.EnvStatsDir, stats)
	var logs bytes.Buffer
	tr, err := ucxnet.NewTransport(ucxnet.Config{Registry: registry.NewMemory(),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	path := tr.StatsSocket()
	if path == "" {
		t.Fatalf("no stats socket: %s", logs.String())
	}
	fi, err := os.Lstat(path)
	if err != nil || filepath.Dir(path) != stats || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("stats socket %q: %v %v", path, fi.Mode(), err)
	}
	snap, err := queryStats(context.Background(), path, os.Getpid(), 5*time.Second)
	if err != nil || snap.Transport != tr.Name() {
		t.Fatalf("query: %+v %v", snap, err)
	}
	// A request other than StatsRequest gets an error, not the snapshot.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
	var buf bytes.Buffer
	buf.ReadFrom(c)
	c.Close()
	if !strings.Contains(buf.String(), `"error"`) || strings.Contains(buf.String(), tr.Name()) {
		t.Errorf("a bad request got %q", buf.String())
	}
	tr.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}

	t.Setenv(ucxnet.EnvStatsDir, ucxnet.StatsOff)
	tr, err = ucxnet.NewTransport(ucxnet.Config{Registry: registry.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if p := tr.StatsSocket(); p != "" {
		t.Errorf("stats socket %q with %s=off", p, ucxnet.EnvStatsDir)
	}
}
