package recipes

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ucxgrpc "github.com/ucxnet/ucxnet/compat/grpc"
)

// TestGRPC: grpc-go serves a ucxnet listener as it is; a client dials
// either a name with the "passthrough" scheme and the core module's dialer,
// or a service through compat/grpc's "ucx" resolver.
func TestGRPC(t *testing.T) {
	p := newPair(t, nil)
	ln, err := ucxgrpc.Listen("", ucxgrpc.WithTransport(p.server), ucxgrpc.WithService("recipes-health"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	targets := map[string][]grpc.DialOption{
		// The drop-in way: nothing but the core module.
		"passthrough:///" + ln.Addr().String(): {grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return p.dialer.DialContext(ctx, "ucx", addr)
		})},
		// Service discovery through the registry.
		"ucx:///recipes-health": {ucxgrpc.WithUCX(ucxgrpc.WithDialer(p.dialer))},
	}
	for target, opts := range targets {
		cc, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		resp, err := healthpb.NewHealthClient(cc).Check(ctxFor(t, 10*time.Second), &healthpb.HealthCheckRequest{Service: "orders"})
		cc.Close()
		if err != nil {
			t.Fatalf("%s: Check: %v", target, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s: status %v, want SERVING", target, resp.GetStatus())
		}
	}
}
