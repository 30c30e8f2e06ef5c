package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

var catCmd = &command{
	Name:  "cat",
	Args:  "NAME",
	Short: "netcat over ucxnet: -l NAME listens, NAME dials",
	Long: `Cat copies stdin to a ucxnet conn and the conn to stdout, like netcat.

  ucxnet cat -l NAME   listen as NAME, accept one conn, then withdraw NAME
  ucxnet cat NAME      dial NAME

At EOF on stdin it shuts down the writing side of the conn (CloseWrite), so
the peer reads EOF; it exits once both directions are finished, after
waiting (up to --linger) for the peer to go, so that the peer surely reads
everything written. Between two ucxnet cats the listener's registry entry
names a second, private name, and over the conn dialed to it each side
tells the other when it has read everything: both exit as soon as both
directions are done, without the wait. Progress and errors go to stderr.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		listen := fs.Bool("l", false, "listen as NAME and accept one conn instead of dialing")
		timeout := fs.Duration("timeout", 10*time.Second, "dial `timeout`")
		quiet := fs.Bool("q", false, "no progress messages on stderr")
		linger := fs.Duration("linger", time.Second, "at the end, wait up to `time` for the peer to finish before exiting")
		netDevices := fs.String("net-devices", "", netDevicesUsage)
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) != 1 {
				return usagef("want exactly one NAME, got %d arguments", len(args))
			}
			return runCat(ctx, sio, args[0], *listen, *timeout, *linger, *quiet, *netDevices)
		}
	},
}

func runCat(ctx context.Context, sio *stdio, name string, listen bool, timeout, linger time.Duration, quiet bool, netDevices string) error {
	logf := func(format string, args ...any) {
		if !quiet {
			fmt.Fprintf(sio.Err, "ucxnet cat: "+format+"\n", args...)
		}
	}
	t, err := newTransport(netDevices, nil)
	if err != nil {
		return err
	}
	// Closing the transport flushes its endpoints; waiting for the peer to
	// go first makes sure it has taken what we wrote (see closeTransport),
	// unless it said so itself (cat records).
	lingerOnExit := false
	defer func() {
		if lingerOnExit {
			closeTransport(t, linger)
		} else {
			t.Close()
		}
	}()

	var c *ucxnet.Conn
	var records bool
	if listen {
		if c, records, err = catAccept(ctx, t, name, logf); err != nil {
			return err
		}
	} else {
		if c, records, err = catDial(ctx, t, name, timeout); err != nil {
			return err
		}
		logf("connected to %s via %s", name, strings.Join(c.Transports(), " "))
	}

	start := time.Now()
	var sent, recv int64
	if records {
		sent, recv, lingerOnExit, err = catRecords(ctx, sio, c)
	} else {
		sent, recv, err = catPlain(ctx, sio, c)
		lingerOnExit = err == nil
	}
	if err != nil {
		c.Close()
		return err
	}
	how := "waiting up to --linger for the peer to go"
	if records && !lingerOnExit {
		how = "the peer, a ucxnet cat, confirmed it has everything"
	}
	logf("done: sent %d bytes, received %d bytes in %v; %s", sent, recv, time.Since(start).Round(time.Millisecond), how)
	err = c.Close()
	switch {
	case err == nil || errors.Is(err, net.ErrClosed):
	case records && !lingerOnExit:
		// The peer confirmed it has everything and may be gone already:
		// a close that finds it gone loses nothing.
		logf("close: %v (after the peer confirmed everything)", err)
	default:
		return err
	}
	return nil
}

// catAccept listens as name, and under a private name for cat records
// that name's registry entry points to, accepts one conn on either and
// withdraws both names. records says the conn came through the private
// name.
func catAccept(ctx context.Context, t *ucxnet.Transport, name string, logf func(string, ...any)) (c *ucxnet.Conn, records bool, err error) {
	alias := registry.UniqueName()
	lns := make([]net.Listener, 0, 2)
	defer func() {
		// One conn only: withdraw the names, the public one first.
		for i := len(lns) - 1; i >= 0; i-- {
			lns[i].Close()
		}
	}()
	// The private name first: a cat that finds it in name's entry dials it
	// at once.
	for _, l := range []struct {
		name string
		lc   ucxnet.ListenConfig
	}{
		{alias, ucxnet.ListenConfig{Transport: t}},
		{name, ucxnet.ListenConfig{Transport: t, Meta: map[string]string{metaCatRecords: alias}}},
	} {
		ln, err := l.lc.Listen(ctx, "ucx", l.name)
		if err != nil {
			return nil, false, err
		}
		lns = append(lns, ln)
	}
	logf("listening as %s (registry %s)", lns[1].Addr(), t.Registry())
	type result struct {
		c       net.Conn
		records bool
		err     error
	}
	ch := make(chan result, len(lns))
	for i, ln := range lns {
		go func() {
			c, err := ln.Accept()
			ch <- result{c, i == 0, err}
		}()
	}
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	if r.err != nil {
		return nil, false, r.err
	}
	c = r.c.(*ucxnet.Conn)
	logf("accepted %s via %s", c.RemoteAddr(), strings.Join(c.Transports(), " "))
	// A second conn accepted meanwhile is reset when its listener closes
	// (queued) or here.
	go func() {
		for range len(lns) - 1 {
			if o := <-ch; o.err == nil {
				o.c.Close()
			}
		}
	}()
	return c, r.records, nil
}

// catDial dials name, or the name for cat records that its registry entry
// gives, if any (records is then true).
func catDial(ctx context.Context, t *ucxnet.Transport, name string, timeout time.Duration) (c *ucxnet.Conn, records bool, err error) {
	target := name
	rctx, cancel := context.WithTimeout(ctx, timeout)
	e, err := t.Registry().Resolve(rctx, name)
	cancel()
	if err == nil {
		if alias := e.Meta[metaCatRecords]; alias != "" && registry.ValidName(alias) == nil {
			target, records = alias, true
		}
	}
	d := ucxnet.Dialer{Timeout: timeout, Transport: t}
	nc, err := d.DialContext(ctx, "ucx", target)
	if err != nil {
		return nil, false, err
	}
	return nc.(*ucxnet.Conn), records, nil
}

// copied is what one direction of a cat moved, and how it ended.
type copied struct {
	n   int64
	err error
}

// catPlain copies the conn to stdout and stdin to the conn (then
// CloseWrite) until both directions are done.
func catPlain(ctx context.Context, sio *stdio, c *ucxnet.Conn) (sent, recv int64, err error) {
	readDone := make(chan recvResult, 1)
	writeDone := make(chan copied, 1)
	go func() { // conn → stdout
		n, err := io.Copy(sio.Out, c)
		readDone <- recvResult{n: n, err: err}
	}()
	go func() { // stdin → conn, then CloseWrite
		n, err := io.Copy(c, sio.In)
		if err == nil {
			err = c.CloseWrite()
		}
		writeDone <- copied{n, err}
	}()
	sent, recv, _, err = catWait(ctx, readDone, writeDone)
	return sent, recv, err
}

// catRecords is catPlain for a peer that speaks cat records
// (cat_records.go). linger is true when the conn ended after the peer's
// data but before its acknowledgement of ours: then only the peer's going
// tells that it took everything.
func catRecords(ctx context.Context, sio *stdio, c *ucxnet.Conn) (sent, recv int64, linger bool, err error) {
	w := &recordConn{w: c}
	readDone := make(chan recvResult, 1)
	writeDone := make(chan copied, 1)
	go func() { readDone <- recvRecords(c, sio.Out, w) }()
	go func() {
		n, err := sendRecords(w, sio.In)
		writeDone <- copied{n, err}
	}()
	return catWait(ctx, readDone, writeDone)
}

// catWait waits for both directions of a cat. A receive that failed after
// the peer's end of data (r.end) is not an error: linger is then true.
func catWait(ctx context.Context, readDone <-chan recvResult, writeDone <-chan copied) (sent, recv int64, linger bool, err error) {
	for readDone != nil || writeDone != nil {
		select {
		case r := <-readDone:
			readDone = nil
			recv = r.n
			switch {
			case r.err == nil:
			case r.end:
				linger = true
			default:
				return 0, 0, false, fmt.Errorf("receiving: %w", r.err)
			}
		case w := <-writeDone:
			writeDone, sent = nil, w.n
			if w.err != nil {
				return 0, 0, false, fmt.Errorf("sending: %w", w.err)
			}
		case <-ctx.Done():
			return 0, 0, false, ctx.Err()
		}
	}
	return sent, recv, linger, nil
}
