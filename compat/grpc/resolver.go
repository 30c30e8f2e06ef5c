package ucxgrpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/resolver"

	"github.com/ucxnet/ucxnet/registry"
)

// Scheme is the gRPC target scheme of the ucxnet resolver: "ucx:///name".
const Scheme = "ucx"

// resolveTimeout bounds one registry lookup.
const resolveTimeout = 5 * time.Second

// NewBuilder returns the resolver.Builder of the "ucx" scheme. For the
// target "ucx:///name" its resolver reads the registry of the transport the
// options select ([WithDialer], [WithTransport], else the default
// transport):
//
//   - if name is a published listener name, the one address name;
//   - otherwise one address per live instance of service name
//     (registry.Instances), each the instance's own name, so that the
//     ucxnet dialer reaches exactly that instance;
//   - a name of the form "host:port" that matches neither is tried as
//     "host".
//
// The resolver re-reads the registry every refresh interval
// ([WithRefreshInterval], default [DefaultRefreshInterval]) and whenever
// gRPC calls ResolveNow, and updates the client only when the set of
// addresses changed. A name with no live listener and no instance is
// reported as a resolver error, so RPCs fail with codes.Unavailable (or
// wait, with grpc.WaitForReady) until one appears.
//
// [WithUCX] passes the builder to grpc.WithResolvers; pass it yourself
// (grpc.WithResolvers(ucxgrpc.NewBuilder(...))) to combine it with another
// dialer, or register it globally with resolver.Register at init time.
func NewBuilder(opts ...Option) resolver.Builder {
	return newBuilder(buildOptions(opts))
}

func newBuilder(o options) *builder { return &builder{o: o} }

type builder struct{ o options }

// Scheme returns "ucx".
func (b *builder) Scheme() string { return Scheme }

// Build starts a resolver for target.
func (b *builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	name := target.Endpoint()
	if err := registry.ValidName(name); err != nil {
		return nil, fmt.Errorf("ucxgrpc: target %q: %w", target.String(), err)
	}
	t, err := b.o.transportOf()
	if err != nil {
		return nil, fmt.Errorf("ucxgrpc: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &ucxResolver{
		cc:       cc,
		reg:      t.Registry(),
		name:     name,
		interval: b.o.refresh,
		now:      make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	go r.run()
	return r, nil
}

type ucxResolver struct {
	cc       resolver.ClientConn
	reg      registry.Registry
	name     string
	interval time.Duration
	now      chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once

	// Owned by run.
	last    []string // addresses last sent; nil before the first update
	lastErr bool     // the last report was an error
}

// ResolveNow asks for an immediate re-read of the registry.
func (r *ucxResolver) ResolveNow(resolver.ResolveNowOptions) {
	select {
	case r.now <- struct{}{}:
	default: // one is pending already
	}
}

// Close stops the resolver and waits for its goroutine.
func (r *ucxResolver) Close() {
	r.once.Do(r.cancel)
	<-r.done
}

func (r *ucxResolver) run() {
	defer close(r.done)
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		r.update()
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		case <-r.now:
		}
	}
}

// update reads the registry and tells gRPC about changes.
func (r *ucxResolver) update() {
	addrs, err := r.lookup()
	if r.ctx.Err() != nil {
		return
	}
	if err != nil {
		// Report each failure spell once; gRPC keeps the last good
		// addresses' connections, and the next success updates it.
		if !r.lastErr {
			r.lastErr = true
			r.last = nil
			r.cc.ReportError(err)
		}
		return
	}
	if !r.lastErr && r.last != nil && slices.Equal(addrs, r.last) {
		return
	}
	st := resolver.State{}
	for _, a := range addrs {
		// ServerName stays empty: TLS checks the target's authority
		// (the service name), not the instance name.
		ra := resolver.Address{Addr: a}
		st.Addresses = append(st.Addresses, ra)
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{ra}})
	}
	r.last, r.lastErr = addrs, false
	// An error means the balancer rejected the state (round_robin does with
	// no addresses); the next poll tries again only if something changed,
	// and gRPC calls ResolveNow when it wants a fresh one.
	_ = r.cc.UpdateState(st)
}

// lookup returns the sorted instance names name stands for.
func (r *ucxResolver) lookup() ([]string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, resolveTimeout)
	defer cancel()
	addrs, err := r.lookupName(ctx, r.name)
	if err == nil && len(addrs) > 0 {
		return addrs, nil
	}
	if err == nil || errors.Is(err, registry.ErrNotFound) {
		if host, _, serr := net.SplitHostPort(r.name); serr == nil && host != "" {
			if a, herr := r.lookupName(ctx, host); herr == nil && len(a) > 0 {
				return a, nil
			}
		}
	}
	if err == nil {
		err = fmt.Errorf("ucxgrpc: no live listener or service instance named %q in %s", r.name, r.reg)
	}
	return nil, err
}

func (r *ucxResolver) lookupName(ctx context.Context, name string) ([]string, error) {
	e, err := r.reg.Resolve(ctx, name)
	if err == nil {
		return []string{e.Name}, nil
	}
	if !errors.Is(err, registry.ErrNotFound) {
		return nil, fmt.Errorf("ucxgrpc: resolving %q in %s: %w", name, r.reg, err)
	}
	insts, err := r.reg.Instances(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("ucxgrpc: listing instances of %q in %s: %w", name, r.reg, err)
	}
	out := make([]string, 0, len(insts))
	for _, e := range insts {
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out, nil
}
