package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

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
everything written. Progress and errors go to stderr.`,
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
	// go first makes sure it has taken what we wrote (see closeTransport).
	lingerOnExit := false
	defer func() {
		if lingerOnExit {
			closeTransport(t, linger)
		} else {
			t.Close()
		}
	}()

	var c *ucxnet.Conn
	if listen {
		lc := ucxnet.ListenConfig{Transport: t}
		ln, err := lc.Listen(ctx, "ucx", name)
		if err != nil {
			return err
		}
		logf("listening as %s (registry %s)", ln.Addr(), t.Registry())
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			c, err := ln.Accept()
			ch <- result{c, err}
		}()
		var r result
		select {
		case r = <-ch:
		case <-ctx.Done():
			ln.Close()
			return ctx.Err()
		}
		ln.Close() // one conn only: withdraw the name
		if r.err != nil {
			return r.err
		}
		c = r.c.(*ucxnet.Conn)
		logf("accepted %s via %s", c.RemoteAddr(), strings.Join(c.Transports(), " "))
	} else {
		d := ucxnet.Dialer{Timeout: timeout, Transport: t}
		nc, err := d.DialContext(ctx, "ucx", name)
		if err != nil {
			return err
		}
		c = nc.(*ucxnet.Conn)
		logf("connected to %s via %s", name, strings.Join(c.Transports(), " "))
	}

	var sent, recv atomic.Int64
	start := time.Now()
	readDone := make(chan error, 1)
	writeDone := make(chan error, 1)
	go func() { // conn → stdout
		n, err := io.Copy(sio.Out, c)
		recv.Store(n)
		readDone <- err
	}()
	go func() { // stdin → conn, then CloseWrite
		n, err := io.Copy(c, sio.In)
		sent.Store(n)
		if err == nil {
			err = c.CloseWrite()
		}
		writeDone <- err
	}()

	var rerr, werr error
	for readDone != nil || writeDone != nil {
		select {
		case rerr = <-readDone:
			readDone = nil
			if rerr != nil {
				c.Close()
				return fmt.Errorf("receiving: %w", rerr)
			}
		case werr = <-writeDone:
			writeDone = nil
			if werr != nil {
				c.Close()
				return fmt.Errorf("sending: %w", werr)
			}
		case <-ctx.Done():
			c.Close()
			return ctx.Err()
		}
	}
	lingerOnExit = true
	el := time.Since(start)
	logf("done: sent %d bytes, received %d bytes in %v", sent.Load(), recv.Load(), el.Round(time.Millisecond))
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
