//go:build linux

package ucxetcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	ucxetcd "github.com/ucxnet/ucxnet/compat/etcd"
	"github.com/ucxnet/ucxnet/registry"
)

func TestRegisterResolveUnregister(t *testing.T) {
	s := needEtcd(t)
	prefix := testPrefix(t)
	r := newRegistry(t, s, prefix)
	c := ctx(t)

	if _, err := r.Resolve(c, "a"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Resolve of a missing name: %v, want ErrNotFound", err)
	}
	if err := r.Register(c, registry.Entry{Name: "a"}); !errors.Is(err, registry.ErrInvalidEntry) {
		t.Fatalf("Register without address: %v, want ErrInvalidEntry", err)
	}
	e := entry("a/b:c", "svc")
	e.Meta = map[string]string{"k": "v"}
	if err := r.Register(c, e); err != nil {
		t.Fatal(err)
	}
	got, err := r.Resolve(c, e.Name)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("Resolve = %+v, %v; want %+v", got, err, e)
	}

	// The stored form: JSON under <prefix>/entries/<name>, on a lease.
	raw := newClient(t, s)
	resp, err := raw.Get(c, prefix+"/entries/"+e.Name)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v, %d kvs", err, len(resp.Kvs))
	}
	var stored registry.Entry
	if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil || !reflect.DeepEqual(stored, e) {
		t.Fatalf("stored %s (%v)", resp.Kvs[0].Value, err)
	}
	ttl, err := raw.TimeToLive(c, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.GrantedTTL != int64(ucxetcd.DefaultTTL/time.Second) {
		t.Fatalf("lease: %+v, %v", ttl, err)
	}

	// Another registry value does not unregister what it did not publish.
	other := newRegistry(t, s, prefix)
	if err := other.Unregister(c, e.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(c, e.Name); err != nil {
		t.Fatalf("entry gone after a foreign Unregister: %v", err)
	}

	if err := r.Unregister(c, e.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Resolve(c, e.Name); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("after Unregister: %v, want ErrNotFound", err)
	}
	if ttl, err := raw.TimeToLive(c, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil || ttl.TTL != -1 {
		t.Fatalf("lease after Unregister: %+v, %v; want revoked", ttl, err)
	}
	if err := r.Unregister(c, e.Name); err != nil {
		t.Fatalf("second Unregister: %v", err)
	}
	// The name can be taken again.
	if err := other.Register(c, e); err != nil {
		t.Fatal(err)
	}
	// Close revokes what the registry published.
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(c, e.Name); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("after Close: %v, want ErrNotFound", err)
	}
	if err := other.Register(c, e); !errors.Is(err, ucxetcd.ErrClosed) {
		t.Fatalf("Register after Close: %v", err)
	}
}

func TestNameInUse(t *testing.T) {
	s := needEtcd(t)
	prefix := testPrefix(t)
	a, b := newRegistry(t, s, prefix), newRegistry(t, s, prefix)
	c := ctx(t)
	if err := a.Register(c, entry("x", "")); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*ucxetcd.Registry{a, b} {
		err := r.Register(c, entry("x", ""))
		if !errors.Is(err, registry.ErrNameInUse) || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("second Register: %v, want ErrNameInUse and EADDRINUSE", err)
		}
	}
	if e, err := b.Resolve(c, "x"); err != nil || string(e.Address) != "addr-x" {
		t.Fatalf("Resolve after the failed Register: %+v, %v", e, err)
	}

	// Racing registries: exactly one wins.
	const n = 6
	regs := make([]*ucxetcd.Registry, n)
	for i := range regs {
		regs[i] = newRegistry(t, s, prefix)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, r := range regs {
		wg.Go(func() {
			e := entry("race", "")
			e.Address = fmt.Appendf(nil, "addr-%d", i)
			errs[i] = r.Register(c, e)
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, syscall.EADDRINUSE):
			t.Fatalf("racing Register: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d racing Registers won, want 1 (%v)", wins, errs)
	}

	if err := a.Unregister(c, "x"); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(c, entry("x", "")); err != nil {
		t.Fatalf("Register after the holder unregistered: %v", err)
	}
}

func TestInstances(t *testing.T) {
	s := needEtcd(t)
	r := newRegistry(t, s, testPrefix(t))
	other := newRegistry(t, s, testPrefix(t))
	c := ctx(t)
	for _, n := range []string{"svc-2", "svc-0", "svc-1"} {
		if err := r.Register(c, entry(n, "svc")); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Register(c, entry("svc-3", "svc")); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(c, entry("lonely", "else")); err != nil {
		t.Fatal(err)
	}
	got, err := other.Instances(c, "svc")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	if want := []string{"svc-0", "svc-1", "svc-2", "svc-3"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Instances = %v, want %v", names, want)
	}
	none, err := r.Instances(c, "nothing")
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("Instances of an unknown service = %#v, %v; want empty, nil", none, err)
	}
}

// A publisher killed with SIGKILL stops renewing its lease: its entry is
// gone once the lease expires.
func TestKilledPublisherExpires(t *testing.T) {
	s := needEtcd(t)
	prefix := testPrefix(t)
	child := startChild(t, s, prefix, "doomed")
	raw := newClient(t, s)
	c := ctx(t)
	present := func() bool {
		resp, err := raw.Get(c, prefix+"/entries/doomed")
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs) == 1
	}
	if !present() {
		t.Fatal("child's entry missing")
	}
	time.Sleep(2500 * time.Millisecond) // longer than the TTL: the child keeps it alive
	if !present() {
		t.Fatal("child's entry expired while the child lived")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	took := waitFor(t, 6*time.Second, "entry of the killed child expires", func() bool { return !present() })
	t.Logf("entry gone %v after SIGKILL (TTL 2 s)", took.Round(10*time.Millisecond))
	if took < 500*time.Millisecond {
		t.Fatalf("entry went away after %v, before its lease could expire", took)
	}
	r := newRegistry(t, s, prefix)
	if _, err := r.Resolve(c, "doomed"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Resolve: %v, want ErrNotFound", err)
	}
}

// An entry left by a dead process of this host is stale at once: Resolve
// reports and deletes it, Register takes the name over.
func TestStaleLocalEntry(t *testing.T) {
	s := needEtcd(t)
	prefix := testPrefix(t)
	r := newRegistry(t, s, prefix)
	c := ctx(t)
	for _, step := range []string{"resolve", "register"} {
		child := startChild(t, s, prefix, "gone")
		_ = child.Process.Kill()
		_ = child.Wait()
		switch step {
		case "resolve":
			_, err := r.Resolve(c, "gone")
			if !errors.Is(err, registry.ErrNotFound) || !strings.Contains(err.Error(), "stale") {
				t.Fatalf("Resolve of a dead child's entry: %v, want a stale ErrNotFound", err)
			}
			if _, err := r.Resolve(c, "gone"); !errors.Is(err, registry.ErrNotFound) || strings.Contains(err.Error(), "stale") {
				t.Fatalf("second Resolve: %v, want a plain ErrNotFound", err)
			}
		case "register":
			if err := r.Register(c, entry("gone", "")); err != nil {
				t.Fatalf("Register over a dead child's entry: %v", err)
			}
			if e, err := r.Resolve(c, "gone"); err != nil || e.PID != os.Getpid() {
				t.Fatalf("Resolve = %+v, %v", e, err)
			}
		}
	}
	// Without the check the dead child's entry holds until its lease ends.
	off := newRegistry(t, s, prefix, ucxetcd.WithLocalLivenessCheck(false))
	child := startChild(t, s, prefix, "gone2")
	_ = child.Process.Kill()
	_ = child.Wait()
	if err := off.Register(c, entry("gone2", "")); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Register with the check off: %v, want EADDRINUSE", err)
	}
}

// A publisher whose lease is revoked behind its back publishes again.
func TestLeaseLostRepublished(t *testing.T) {
	s := needEtcd(t)
	prefix := testPrefix(t)
	r := newRegistry(t, s, prefix, ucxetcd.WithTTL(2*time.Second))
	raw := newClient(t, s)
	c := ctx(t)
	if err := r.Register(c, entry("phoenix", "")); err != nil {
		t.Fatal(err)
	}
	key := prefix + "/entries/phoenix"
	resp, err := raw.Get(c, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	old := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := raw.Revoke(c, old); err != nil {
		t.Fatal(err)
	}
	var lease clientv3.LeaseID
	took := waitFor(t, 5*time.Second, "entry published again", func() bool {
		resp, err := raw.Get(c, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 {
			lease = clientv3.LeaseID(resp.Kvs[0].Lease)
			return true
		}
		return false
	})
	t.Logf("published again %v after its lease was revoked", took.Round(10*time.Millisecond))
	if lease == old || lease == 0 {
		t.Fatalf("lease %x after republishing (old %x)", lease, old)
	}
	if err := r.Unregister(c, "phoenix"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := raw.Get(c, key); len(resp.Kvs) != 0 {
		t.Fatal("entry left after Unregister")
	}
}

// etcd restarts (same data dir): the entry survives a short outage and is
// published again after one longer than the TTL.
func TestEtcdRestart(t *testing.T) {
	needEtcd(t)
	s, err := startEtcd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	prefix := testPrefix(t)
	r := newRegistry(t, s, prefix, ucxetcd.WithTTL(2*time.Second))
	if err := r.Register(ctx(t), entry("survivor", "")); err != nil {
		t.Fatal(err)
	}
	watcher := newRegistry(t, s, prefix)
	resolves := func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := watcher.Resolve(c, "survivor")
		return err == nil
	}
	raw := newClient(t, s)
	lease := func() int64 {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := raw.Get(c, prefix+"/entries/survivor")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("raw get: %v, %v", resp, err)
		}
		return resp.Kvs[0].Lease
	}
	for _, down := range []time.Duration{0, 3500 * time.Millisecond} {
		before := lease()
		s.stop()
		time.Sleep(down)
		start := time.Now()
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		took := waitFor(t, 8*time.Second, fmt.Sprintf("entry back after %v down", down), resolves)
		t.Logf("etcd down %v, restarted in %v; entry resolvable %v later", down,
			time.Since(start).Round(10*time.Millisecond)-took.Round(10*time.Millisecond), took.Round(10*time.Millisecond))
		// etcd keeps leases across restarts; the client gives one up when
		// it has had no answer for a whole TTL, and publishes again.
		// (The server extends the leases it recovers, so the old lease may
		// still hold the entry for a moment.)
		if down == 0 {
			if after := lease(); after != before {
				t.Fatalf("etcd down briefly: lease %x before, %x after", before, after)
			}
		} else {
			waitFor(t, 5*time.Second, "entry on a new lease", func() bool { return lease() != before })
		}
	}
	// The lease it holds now is kept alive.
	time.Sleep(4500 * time.Millisecond)
	if !resolves() {
		t.Fatal("entry expired after the restart: its lease is not kept alive")
	}
}

func TestWatch(t *testing.T) {
	s := needEtcd(t)
	prefix := testPrefix(t)
	r := newRegistry(t, s, prefix)
	pub := newRegistry(t, s, prefix)
	c := ctx(t)
	wctx, cancel := context.WithCancel(c)
	ch := r.Watch(wctx, "w")
	next := func(want ...string) {
		t.Helper()
		select {
		case list, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed")
			}
			names := []string{}
			for _, e := range list {
				names = append(names, e.Name)
			}
			if !reflect.DeepEqual(names, want) && !(len(want) == 0 && len(names) == 0) {
				t.Fatalf("Watch sent %v, want %v", names, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Watch sent nothing; want %v", want)
		}
	}
	next() // the initial, empty list
	if err := pub.Register(c, entry("w-b", "w")); err != nil {
		t.Fatal(err)
	}
	next("w-b")
	if err := pub.Register(c, entry("other", "not-w")); err != nil {
		t.Fatal(err)
	}
	if err := pub.Register(c, entry("w-a", "w")); err != nil {
		t.Fatal(err)
	}
	next("w-a", "w-b") // the other service's entry sent nothing
	if err := pub.Unregister(c, "w-b"); err != nil {
		t.Fatal(err)
	}
	next("w-a")
	cancel()
	for range ch {
	}
}

func TestOpenScheme(t *testing.T) {
	s := needEtcd(t)
	spec := "etcd://" + s.clientAddr + "/open-test?ttl=3s&timeout=4"
	reg, err := registry.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := reg.(*ucxetcd.Registry)
	if !ok {
		t.Fatalf("Open gave %T", reg)
	}
	defer r.Close()
	if r.Prefix() != "/open-test" || r.String() != "etcd://"+s.clientAddr+"/open-test" {
		t.Fatalf("prefix %q, String %q", r.Prefix(), r.String())
	}
	c := ctx(t)
	if err := r.Register(c, entry("opened", "")); err != nil {
		t.Fatal(err)
	}
	resp, err := r.Client().Get(c, "/open-test/entries/opened")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("%v, %v", resp, err)
	}
	if ttl, err := r.Client().TimeToLive(c, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil || ttl.GrantedTTL != 3 {
		t.Fatalf("granted TTL %+v, %v; want 3", ttl, err)
	}

	// UCXNET_REGISTRY selects it too, and sees the same entries.
	t.Setenv(registry.EnvRegistry, "ETCD://"+s.clientAddr+",127.0.0.1:1/open-test/")
	reg2, err := registry.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer reg2.(*ucxetcd.Registry).Close()
	if _, err := reg2.Resolve(c, "opened"); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := reg2.Resolve(c, "opened"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("after Close of the publisher: %v", err)
	}
}

func TestDialSpec(t *testing.T) {
	for _, tc := range []struct{ spec, str string }{
		{"etcd", "etcd://127.0.0.1:2379/ucxnet"},
		{"etcd:", "etcd://127.0.0.1:2379/ucxnet"},
		{"etcd://", "etcd://127.0.0.1:2379/ucxnet"},
		{"etcd://h1:1,h2:2", "etcd://h1:1,h2:2/ucxnet"},
		{"etcd://h1:1/a/b/", "etcd://h1:1/a/b"},
		{"etcd:/p", "etcd://127.0.0.1:2379/p"},
	} {
		r, err := ucxetcd.Dial(tc.spec)
		if err != nil {
			t.Errorf("Dial(%q): %v", tc.spec, err)
			continue
		}
		if r.String() != tc.str {
			t.Errorf("Dial(%q).String() = %q, want %q", tc.spec, r.String(), tc.str)
		}
		r.Close()
	}
	// Credentials make clientv3.New authenticate at once, so they are
	// checked without dialing.
	eps, user, pass, prefix, err := ucxetcd.ParseSpec("etcd://u%40x:p%3Aw@h1:1,http%3A%2F%2Fh2:2/a%20b")
	if err != nil || user != "u@x" || pass != "p:w" || prefix != "/a b" ||
		!reflect.DeepEqual(eps, []string{"h1:1", "http://h2:2"}) {
		t.Errorf("ParseSpec: %q %q %q %q %v", eps, user, pass, prefix, err)
	}
	for _, spec := range []string{"etcd://h:1/p?bogus=1", "etcd://h:1/p?ttl=-1", "etcd://h:1/p?ttl=soon", "http://h:1"} {
		if r, err := ucxetcd.Dial(spec); err == nil {
			r.Close()
			t.Errorf("Dial(%q) succeeded", spec)
		}
	}
}
