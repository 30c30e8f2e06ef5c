//go:build linux

package ucxetcd_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	ucxetcd "github.com/ucxnet/ucxnet/compat/etcd"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// Two transports that meet through etcd: Listen publishes there, Dial
// resolves there (by instance and by service name).
func TestUCXNetEcho(t *testing.T) {
	s := needEtcd(t)
	spec := "etcd://" + s.clientAddr + testPrefix(t)
	transport := func() *ucxnet.Transport {
		reg, err := ucxetcd.Dial(spec)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := ucxnet.NewTransport(ucxnet.Config{Registry: reg})
		if err != nil {
			reg.Close()
			t.Fatalf("NewTransport: %v", err)
		}
		t.Cleanup(func() {
			tr.Close()
			reg.Close()
		})
		return tr
	}
	st, ct := transport(), transport()
	c := ctx(t)

	lc := ucxnet.ListenConfig{Transport: st, Service: "echo-svc"}
	ln, err := lc.Listen(c, "ucx", "echo-0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := lc.Listen(c, "ucx", "echo-0"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second Listen: %v, want EADDRINUSE", err)
	}
	lc2 := ucxnet.ListenConfig{Transport: ct}
	if _, err := lc2.Listen(c, "ucx", "echo-0"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Listen on the other transport: %v, want EADDRINUSE", err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()

	d := &ucxnet.Dialer{Transport: ct, Timeout: 10 * time.Second}
	for _, target := range []string{"echo-0", "echo-svc"} {
		conn, err := d.DialContext(c, "ucx", target)
		if err != nil {
			t.Fatalf("Dial %q: %v", target, err)
		}
		msg := bytes.Repeat([]byte("ucx over etcd "), 20000)
		go func() { _, _ = conn.Write(msg) }()
		got := make([]byte, len(msg))
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo via %q: %v", target, err)
		}
		conn.Close()
	}

	// Closing the listener withdraws the name from etcd.
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ct.Registry().Resolve(c, "echo-0"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Resolve after listener Close: %v", err)
	}
	dc, cancel := context.WithTimeout(c, 5*time.Second)
	defer cancel()
	if _, err := d.DialContext(dc, "ucx", "echo-0"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial after listener Close: %v, want ECONNREFUSED", err)
	}
}
