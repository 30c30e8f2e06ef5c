package ucxetcd

// This file holds the Registry type, its leases and keepers,
// Resolve/Instances with liveness and Close; watch.go holds Watch.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ucxnet/ucxnet/registry"
)

// Defaults.
const (
	// DefaultPrefix is the key prefix used when none is given.
	DefaultPrefix = "/ucxnet"
	// DefaultTTL is the lifetime of an entry's lease: how long an entry
	// outlives a publisher that died without unregistering.
	DefaultTTL = 10 * time.Second
	// DefaultRequestTimeout bounds each etcd request whose context has no
	// earlier deadline.
	DefaultRequestTimeout = 5 * time.Second
)

// ErrClosed reports the use of a Registry after Close.
var ErrClosed = errors.New("ucxetcd: registry closed")

// Option configures a Registry.
type Option func(*Registry)

// WithTTL sets the lifetime of the lease each entry is attached to
// (default [DefaultTTL]). etcd counts in whole seconds: d is rounded up, to
// at least 1 s, and the server raises a TTL below its minimum (1.5 times
// its election timeout, so 2 s with the default settings).
func WithTTL(d time.Duration) Option {
	return func(r *Registry) {
		s := int64((d + time.Second - 1) / time.Second)
		if s < 1 {
			s = 1
		}
		r.ttl = s
	}
}

// WithRequestTimeout bounds each etcd request whose context has no earlier
// deadline (default [DefaultRequestTimeout]). The client waits for an
// unreachable cluster rather than failing at once, so without a bound a
// Register with a background context could hang while etcd is down.
// Zero or negative means no bound.
func WithRequestTimeout(d time.Duration) Option {
	return func(r *Registry) { r.timeout = d }
}

// WithErrorHandler sets a function called with errors that happen in the
// background: failures to publish an entry again after its lease was lost,
// and failed list requests of [Registry.Watch]. By default they are
// dropped. f must not block for long; it may be called concurrently.
func WithErrorHandler(f func(error)) Option {
	return func(r *Registry) { r.onErr = f }
}

// WithLocalLivenessCheck turns the check for entries of dead local
// publishers on or off (default on). When on, an entry whose Host is this
// host and whose PID names no running process (or a process with another
// start time than Entry.StartTime) is stale: Resolve and Instances skip and
// delete it, Watch leaves it out and Register replaces it. When off, only
// lease expiry removes entries. Turn it off where processes that share a
// host name do not share a pid namespace.
func WithLocalLivenessCheck(on bool) Option {
	return func(r *Registry) { r.liveness = on }
}

// Registry is a [registry.Registry] kept in etcd. Create one with [New] or
// [Dial]; it is safe for concurrent use.
type Registry struct {
	cli       *clientv3.Client
	ownClient bool
	prefix    string // normalized: leading '/', no trailing '/'
	name      string // for String
	ttl       int64  // seconds
	timeout   time.Duration
	onErr     func(error)
	liveness  bool
	host      string

	mu     sync.Mutex
	regs   map[string]*registration
	closed bool

	// closing is canceled by Close, which then waits for watchers: the
	// goroutines of Watch.
	closing  context.Context
	stopAll  context.CancelFunc
	watchers sync.WaitGroup
}

// registration is an entry this Registry published and keeps alive.
type registration struct {
	key string
	val []byte

	mu      sync.Mutex // held while publishing and while stopping
	lease   atomic.Int64
	cancel  context.CancelFunc
	done    chan struct{} // closed when the keeper goroutine ends; nil if none runs
	stopped bool
}

var _ registry.Registry = (*Registry)(nil)

func init() { registry.RegisterScheme("etcd", Open) }

// New returns a Registry that keeps its entries in etcd through client,
// under the key prefix prefix ("" means [DefaultPrefix]). Close does not
// close client.
func New(client *clientv3.Client, prefix string, opts ...Option) *Registry {
	r := &Registry{
		cli:      client,
		prefix:   normPrefix(prefix),
		ttl:      int64(DefaultTTL / time.Second),
		timeout:  DefaultRequestTimeout,
		liveness: true,
		regs:     map[string]*registration{},
	}
	_, _, r.host = registry.CurrentProcess()
	r.closing, r.stopAll = context.WithCancel(context.Background())
	for _, o := range opts {
		o(r)
	}
	r.name = "etcd://" + strings.Join(client.Endpoints(), ",") + r.prefix
	return r
}

// normPrefix gives prefix a leading '/' and no trailing one; "" and "/"
// become DefaultPrefix.
func normPrefix(p string) string {
	p = strings.TrimRight(p, "/")
	if p == "" {
		return DefaultPrefix
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

// Client returns the etcd client the registry uses.
func (r *Registry) Client() *clientv3.Client { return r.cli }

// Prefix returns the key prefix; entries are stored under Prefix()+"/entries/".
func (r *Registry) Prefix() string { return r.prefix }

// Key returns the etcd key of the entry named name.
func (r *Registry) Key(name string) string { return r.entriesPrefix() + name }

func (r *Registry) entriesPrefix() string { return r.prefix + "/entries/" }

// String names the registry: "etcd://<endpoints>/<prefix>".
func (r *Registry) String() string { return r.name }

// opCtx bounds a request by the registry's request timeout.
func (r *Registry) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.timeout)
}

func (r *Registry) report(err error) {
	if r.onErr != nil && err != nil {
		r.onErr(err)
	}
}

// Register publishes e under a new lease and keeps the lease alive until
// Unregister or Close. It fails with an error wrapping
// [registry.ErrNameInUse] if a live entry of that name exists, whoever
// published it; an entry whose local publisher is dead is replaced.
func (r *Registry) Register(ctx context.Context, e registry.Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	val, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("ucxetcd: encoding entry %q: %w", e.Name, err)
	}
	reg := &registration{key: r.Key(e.Name), val: val}
	reg.mu.Lock()
	defer reg.mu.Unlock()

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if _, dup := r.regs[e.Name]; dup {
		r.mu.Unlock()
		return fmt.Errorf("%w: %q is published by this registry (%s)", registry.ErrNameInUse, e.Name, r)
	}
	r.regs[e.Name] = reg
	r.mu.Unlock()

	id, err := r.claim(ctx, reg.key, reg.val, 0)
	if err != nil {
		r.mu.Lock()
		if r.regs[e.Name] == reg {
			delete(r.regs, e.Name)
		}
		r.mu.Unlock()
		if errors.Is(err, registry.ErrNameInUse) {
			return fmt.Errorf("%w: %q (%s)", registry.ErrNameInUse, e.Name, r)
		}
		return fmt.Errorf("ucxetcd: registering %q in %s: %w", e.Name, r, err)
	}
	reg.lease.Store(int64(id))
	kctx, cancel := context.WithCancel(context.Background())
	reg.cancel = cancel
	reg.done = make(chan struct{})
	go r.keep(kctx, reg)
	return nil
}

// claim grants a lease and puts key=val under it if the key is free. A key
// held by an entry this registry published before (under lease prev, or
// with the same value, when prev is not 0) or by a stale entry is taken
// over; any other holder makes claim fail with ErrNameInUse.
func (r *Registry) claim(ctx context.Context, key string, val []byte, prev clientv3.LeaseID) (clientv3.LeaseID, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	g, err := r.cli.Grant(ctx, r.ttl)
	if err != nil {
		return 0, err
	}
	id := g.ID
	fail := func(err error) (clientv3.LeaseID, error) {
		r.revoke(id)
		return 0, err
	}
	for range 4 {
		resp, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(id))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return fail(err)
		}
		if resp.Succeeded {
			return id, nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue // deleted in between
		}
		kv := kvs[0]
		ours := prev != 0 && (clientv3.LeaseID(kv.Lease) == prev || bytes.Equal(kv.Value, val))
		if !ours {
			if e, derr := decode(kv, key[len(r.entriesPrefix()):]); derr == nil {
				if ok, _ := r.alive(e); ok {
					return fail(registry.ErrNameInUse)
				}
			} else {
				return fail(registry.ErrNameInUse) // someone else's, in a format we do not know
			}
		}
		resp, err = r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(id))).
			Commit()
		if err != nil {
			return fail(err)
		}
		if resp.Succeeded {
			if ours && kv.Lease != 0 && clientv3.LeaseID(kv.Lease) != id {
				r.revoke(clientv3.LeaseID(kv.Lease))
			}
			return id, nil
		}
	}
	return fail(fmt.Errorf("ucxetcd: key %q keeps changing", key))
}

// revoke revokes lease id, best effort.
func (r *Registry) revoke(id clientv3.LeaseID) {
	ctx, cancel := r.opCtx(context.Background())
	defer cancel()
	_, _ = r.cli.Revoke(ctx, id)
}

// keep renews reg's lease until ctx ends; when the lease is lost (its keep
// alive channel closes: etcd forgot the lease, or did not answer for a
// whole TTL) it publishes the entry again under a new lease.
func (r *Registry) keep(ctx context.Context, reg *registration) {
	defer close(reg.done)
	backoff := 100 * time.Millisecond
	maxBackoff := time.Duration(r.ttl) * time.Second / 2
	if maxBackoff < time.Second {
		maxBackoff = time.Second
	}
	for {
		lease := clientv3.LeaseID(reg.lease.Load())
		ch, err := r.cli.KeepAlive(ctx, lease)
		if err == nil {
			for range ch {
				backoff = 100 * time.Millisecond
			}
		}
		for {
			if ctx.Err() != nil {
				return
			}
			id, err := r.claim(ctx, reg.key, reg.val, lease)
			if err == nil {
				reg.lease.Store(int64(id))
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.report(fmt.Errorf("ucxetcd: publishing %q again in %s: %w", strings.TrimPrefix(reg.key, r.entriesPrefix()), r, err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// stop ends reg's keeper and revokes its lease, which deletes its entry.
func (r *Registry) stop(ctx context.Context, reg *registration) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.stopped || reg.done == nil {
		reg.stopped = true
		return nil
	}
	reg.stopped = true
	reg.cancel()
	<-reg.done
	id := clientv3.LeaseID(reg.lease.Load())
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if _, err := r.cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("ucxetcd: unregistering %q from %s: %w", strings.TrimPrefix(reg.key, r.entriesPrefix()), r, err)
	}
	return nil
}

// Unregister removes the entry named name if this Registry published it:
// it stops renewing its lease and revokes it. Other names are left alone
// and are not an error.
func (r *Registry) Unregister(ctx context.Context, name string) error {
	r.mu.Lock()
	reg := r.regs[name]
	delete(r.regs, name)
	r.mu.Unlock()
	if reg == nil {
		return nil
	}
	return r.stop(ctx, reg)
}

// Close unregisters every entry this Registry published (stopping their
// keepers), ends every [Registry.Watch] and waits for its goroutine, and,
// if [Dial] created its client, closes the client. No goroutine of the
// Registry outlives Close. The Registry is unusable afterwards; Close is
// idempotent.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	regs := r.regs
	r.regs = map[string]*registration{}
	r.mu.Unlock()
	r.stopAll()
	r.watchers.Wait()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, reg := range regs {
		wg.Go(func() {
			if err := r.stop(context.Background(), reg); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	if r.ownClient {
		if err := r.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// decode parses an entry value stored under the name name.
func decode(kv *mvccpb.KeyValue, name string) (registry.Entry, error) {
	var e registry.Entry
	if err := json.Unmarshal(kv.Value, &e); err != nil {
		return e, err
	}
	if e.Name != name {
		return e, fmt.Errorf("holds name %q", e.Name)
	}
	if err := e.Validate(); err != nil {
		return e, err
	}
	return e, nil
}

// alive reports whether e's publisher may still be running, and if not why.
func (r *Registry) alive(e registry.Entry) (bool, string) {
	if !r.liveness || e.Host != r.host || e.PID <= 0 {
		return true, ""
	}
	return processAlive(e.PID, e.StartTime, e.Host)
}

// removeIfUnchanged deletes kv's key unless it changed since kv was read.
func (r *Registry) removeIfUnchanged(ctx context.Context, kv *mvccpb.KeyValue) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key := string(kv.Key)
	_, _ = r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(key)).
		Commit()
}

// check classifies kv: the entry, or why it is corrupt or stale.
func (r *Registry) check(kv *mvccpb.KeyValue) (registry.Entry, string, error) {
	name := strings.TrimPrefix(string(kv.Key), r.entriesPrefix())
	e, err := decode(kv, name)
	if err != nil {
		return e, "corrupt", err
	}
	if ok, why := r.alive(e); !ok {
		return e, "stale", errors.New(why)
	}
	return e, "", nil
}

// Resolve returns the entry named name. A missing entry, or a stale or
// corrupt one (which is deleted), yields an error wrapping
// [registry.ErrNotFound].
func (r *Registry) Resolve(ctx context.Context, name string) (registry.Entry, error) {
	if err := registry.ValidName(name); err != nil {
		return registry.Entry{}, fmt.Errorf("%w: %w", registry.ErrNotFound, err)
	}
	octx, cancel := r.opCtx(ctx)
	resp, err := r.cli.Get(octx, r.Key(name))
	cancel()
	if err != nil {
		return registry.Entry{}, fmt.Errorf("ucxetcd: resolving %q in %s: %w", name, r, err)
	}
	if len(resp.Kvs) == 0 {
		return registry.Entry{}, fmt.Errorf("%w: %q (%s)", registry.ErrNotFound, name, r)
	}
	kv := resp.Kvs[0]
	e, bad, err := r.check(kv)
	if bad != "" {
		r.removeIfUnchanged(ctx, kv)
		return registry.Entry{}, fmt.Errorf("%w: removed %s entry %q (%s): %v", registry.ErrNotFound, bad, name, r, err)
	}
	return e, nil
}

// Instances returns the live entries whose Service is service, sorted by
// Name. Stale and corrupt entries are skipped and deleted.
func (r *Registry) Instances(ctx context.Context, service string) ([]registry.Entry, error) {
	octx, cancel := r.opCtx(ctx)
	resp, err := r.cli.Get(octx, r.entriesPrefix(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ucxetcd: listing %s: %w", r, err)
	}
	out := []registry.Entry{}
	for _, kv := range resp.Kvs {
		e, bad, _ := r.check(kv)
		if bad != "" {
			r.removeIfUnchanged(ctx, kv)
			continue
		}
		if e.Service == service {
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out, nil
}

func sortEntries(es []registry.Entry) {
	slices.SortFunc(es, func(a, b registry.Entry) int { return strings.Compare(a.Name, b.Name) })
}
