//go:build linux

package ucxetcd_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	ucxetcd "github.com/ucxnet/ucxnet/compat/etcd"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// TestCloseNoLeak: a Registry from Dial owns its client; Close stops its
// keepers and watches and closes the client, and no goroutine is left.
func TestCloseNoLeak(t *testing.T) {
	s := needEtcd(t)
	ignore := goleak.IgnoreCurrent()
	r, err := ucxetcd.Dial("etcd://" + s.clientAddr + testPrefix(t))
	if err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	for i := 0; i < 3; i++ {
		if err := r.Register(c, entry(fmt.Sprintf("leak-%d", i), "svc")); err != nil {
			t.Fatal(err)
		}
	}
	// A watch whose context never ends: Close must end it.
	w := r.Watch(context.Background(), "svc")
	if list := <-w; len(list) != 3 {
		t.Fatalf("watch: %d entries, want 3", len(list))
	}
	if _, err := r.Resolve(c, "leak-0"); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range w {
	} // closed by Close
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-r.Watch(context.Background(), "svc"); ok {
		t.Error("Watch after Close delivered a list")
	}
	goleak.VerifyNone(t, ignore)

	// The entries went with Close.
	check := newRegistry(t, s, testPrefix(t))
	if list, err := check.Instances(c, "svc"); err != nil || len(list) != 0 {
		t.Errorf("after Close: %d entries (%v), want none", len(list), err)
	}
}

// TestTransportClosesEtcdRegistry: a Transport whose registry came from
// UCXNET_REGISTRY=etcd://... owns it, and its Close closes it: the etcd
// client, its keepers and watches leave no goroutine behind.
func TestTransportClosesEtcdRegistry(t *testing.T) {
	s := needEtcd(t)
	t.Setenv(registry.EnvRegistry, "etcd://"+s.clientAddr+testPrefix(t))
	ignore := goleak.IgnoreCurrent()
	tr, err := ucxnet.NewTransport(ucxnet.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Registry().(*ucxetcd.Registry); !ok {
		t.Fatalf("registry from the environment is %T, want *ucxetcd.Registry", tr.Registry())
	}
	lc := ucxnet.ListenConfig{Transport: tr, Service: "closing"}
	if _, err := lc.Listen(ctx(t), "ucx", "closing-0"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t, ignore)
}
