package ucxgrpc

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// DefaultRefreshInterval is how often the "ucx" resolver re-reads the
// registry when no [WithRefreshInterval] option is given.
const DefaultRefreshInterval = time.Second

// Option configures [WithUCX], [DialOptions], [NewBuilder] and [Listen].
// Each function uses the options that concern it and ignores the others.
type Option func(*options)

type options struct {
	transport *ucxnet.Transport
	dialer    *ucxnet.Dialer
	timeout   time.Duration
	refresh   time.Duration
	service   string
	meta      map[string]string
	backlog   int
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.refresh <= 0 {
		o.refresh = DefaultRefreshInterval
	}
	return o
}

// transportOf returns the transport the options select: the dialer's, else
// the explicit one, else the default transport.
func (o *options) transportOf() (*ucxnet.Transport, error) {
	if o.dialer != nil && o.dialer.Transport != nil {
		return o.dialer.Transport, nil
	}
	if o.transport != nil {
		return o.transport, nil
	}
	return ucxnet.DefaultTransport()
}

// ucxDialer returns the dialer the options select.
func (o *options) ucxDialer() *ucxnet.Dialer {
	if o.dialer != nil {
		return o.dialer
	}
	return &ucxnet.Dialer{Transport: o.transport, Timeout: o.timeout}
}

// WithTransport selects the ucxnet transport to dial from or listen on, and
// whose registry the resolver reads. The default is
// ucxnet.DefaultTransport().
func WithTransport(t *ucxnet.Transport) Option {
	return func(o *options) { o.transport = t }
}

// WithDialer makes the client dial with d. It takes precedence over
// [WithTransport] and [WithDialTimeout] for dialing, and the resolver reads
// the registry of d.Transport (the default transport if that is nil).
func WithDialer(d *ucxnet.Dialer) Option {
	return func(o *options) { o.dialer = d }
}

// WithDialTimeout bounds each ucxnet dial (resolution and handshake); zero
// means ucxnet's default. gRPC's own connect deadline also applies.
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// WithRefreshInterval sets how often the "ucx" resolver re-reads the
// registry; zero or negative means [DefaultRefreshInterval]. It also
// re-reads it whenever gRPC asks it to (after a connection fails, say).
func WithRefreshInterval(d time.Duration) Option {
	return func(o *options) { o.refresh = d }
}

// WithService makes [Listen] publish the listener as an instance of
// service, so that "ucx:///service" reaches it (and the other instances).
func WithService(service string) Option {
	return func(o *options) { o.service = service }
}

// WithMeta makes [Listen] publish meta with the listener's registry entry.
func WithMeta(meta map[string]string) Option {
	return func(o *options) { o.meta = meta }
}

// WithBacklog overrides, for [Listen], how many connections may wait for
// Accept before further dials are refused.
func WithBacklog(n int) Option {
	return func(o *options) { o.backlog = n }
}

// ContextDialer returns a function for grpc.WithContextDialer that dials
// the gRPC address — a ucxnet name — with d over network "ucx". A nil d
// means a zero ucxnet.Dialer (the default transport).
func ContextDialer(d *ucxnet.Dialer) func(context.Context, string) (net.Conn, error) {
	if d == nil {
		d = &ucxnet.Dialer{}
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, ucxnet.Network, addr)
	}
}

// DialOptions returns the dial options that [WithUCX] combines: the ucxnet
// context dialer and the "ucx" resolver (see [NewBuilder]), both on the
// transport the options select. Add them to grpc.NewClient's options.
func DialOptions(opts ...Option) []grpc.DialOption {
	o := buildOptions(opts)
	return []grpc.DialOption{
		grpc.WithContextDialer(ContextDialer(o.ucxDialer())),
		grpc.WithResolvers(newBuilder(o)),
	}
}

// WithUCX returns a dial option that makes a gRPC client connect over
// ucxnet: it installs the ucxnet context dialer and, for this client only
// (no global registration), the resolver of the "ucx" scheme, so the
// target may be "ucx:///name" (resolved through the registry; see
// [NewBuilder]) or "passthrough:///name" (dialed as is).
func WithUCX(opts ...Option) grpc.DialOption {
	return joinDialOptions(DialOptions(opts...)...)
}

// Listen announces name on a ucxnet transport (the default one unless
// [WithTransport] says otherwise) and returns the listener for
// grpc.Server.Serve. An empty name publishes a fresh unique name
// (ln.Addr().String()); [WithService] publishes the listener as an
// instance of a service. The listener unpublishes the name when closed,
// which grpc.Server.Stop and GracefulStop do.
func Listen(name string, opts ...Option) (net.Listener, error) {
	o := buildOptions(opts)
	lc := ucxnet.ListenConfig{Transport: o.transport, Service: o.service, Meta: o.meta, Backlog: o.backlog}
	return lc.Listen(context.Background(), ucxnet.Network, name)
}
