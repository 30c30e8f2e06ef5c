package ucxgrpc_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	ucxgrpc "github.com/ucxnet/ucxnet/compat/grpc"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

const roundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// servedBy makes batches of n calls until one is served by exactly the
// instances in want (each serving the same share if even), and returns how
// many calls each served in that batch; it fails if a call fails or no batch
// qualifies in time. Batches repeat because the client learns of instance
// changes asynchronously.
func servedBy(t *testing.T, c testgrpc.TestServiceClient, want []string, n int, even bool) map[string]int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got map[string]int
	for {
		got = map[string]int{}
		for range n {
			resp, err := c.UnaryCall(ctxFor(t, 10*time.Second), &testgrpc.SimpleRequest{})
			if err != nil {
				t.Fatalf("call failed: %v", err)
			}
			got[resp.GetServerId()]++
		}
		if slices.Equal(slices.Sorted(maps.Keys(got)), want) && (!even || isEven(got, n)) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("last %d calls served by %v, want exactly %v", n, got, want)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not for correctness
	}
}

func isEven(got map[string]int, n int) bool {
	for _, k := range got {
		if k != n/len(got) {
			return false
		}
	}
	return true
}

// TestResolverService runs three instances of one service in process,
// each on its own transport, and a round_robin client on "ucx:///orders".
func TestResolverService(t *testing.T) {
	reg := registry.NewMemory()
	var servers []*server
	for range 3 {
		servers = append(servers, startServer(t, newTransport(t, reg), []ucxgrpc.Option{ucxgrpc.WithService("orders")}))
	}
	names := func() []string {
		var out []string
		for _, s := range servers {
			out = append(out, s.name)
		}
		return slices.Sorted(slices.Values(out))
	}
	ct := newTransport(t, reg)
	cc := dial(t, "ucx:///orders",
		grpc.WithDefaultServiceConfig(roundRobin),
		ucxgrpc.WithUCX(ucxgrpc.WithTransport(ct), ucxgrpc.WithRefreshInterval(50*time.Millisecond)))
	c := testgrpc.NewTestServiceClient(cc)

	// round_robin spreads the calls evenly.
	servedBy(t, c, names(), 30, true)

	// One instance stops: it drops out and the others take the calls.
	// (GracefulStop: a hard Stop may fail a call sent just before the
	// client reads the EOF, over ucxnet as over TCP.)
	servers[1].srv.GracefulStop()
	servers = slices.Delete(servers, 1, 2)
	servedBy(t, c, names(), 20, true)

	// A new instance appears: the periodic re-resolution finds it.
	servers = append(servers, startServer(t, newTransport(t, reg), []ucxgrpc.Option{ucxgrpc.WithService("orders")}))
	servedBy(t, c, names(), 30, true)
}

// TestResolverName: a target naming one listener reaches that listener
// even when it also is an instance of a service.
func TestResolverName(t *testing.T) {
	reg := registry.NewMemory()
	a := startServer(t, newTransport(t, reg), []ucxgrpc.Option{ucxgrpc.WithService("svc")})
	startServer(t, newTransport(t, reg), []ucxgrpc.Option{ucxgrpc.WithService("svc")})
	ct := newTransport(t, reg)
	for _, target := range []string{"ucx:///" + a.name, "ucx:" + a.name, "ucx:///" + a.name + ":443"} {
		cc := dial(t, target, ucxgrpc.WithUCX(ucxgrpc.WithDialer(&ucxnet.Dialer{Transport: ct})))
		servedBy(t, testgrpc.NewTestServiceClient(cc), []string{a.name}, 5, false)
	}
	// NewBuilder and ContextDialer, as separate dial options.
	cc := dial(t, "ucx:///"+a.name,
		grpc.WithResolvers(ucxgrpc.NewBuilder(ucxgrpc.WithTransport(ct))),
		grpc.WithContextDialer(ucxgrpc.ContextDialer(&ucxnet.Dialer{Transport: ct})))
	servedBy(t, testgrpc.NewTestServiceClient(cc), []string{a.name}, 5, false)
}

// TestResolverNobody: a name with no listener fails RPCs with Unavailable,
// and one that appears later is found.
func TestResolverNobody(t *testing.T) {
	reg := registry.NewMemory()
	ct := newTransport(t, reg)
	cc := dial(t, "ucx:///later", ucxgrpc.WithUCX(ucxgrpc.WithTransport(ct), ucxgrpc.WithRefreshInterval(20*time.Millisecond)))
	c := testgrpc.NewTestServiceClient(cc)
	_, err := c.EmptyCall(ctxFor(t, 10*time.Second), &testgrpc.Empty{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call to nobody: %v, want Unavailable", err)
	}
	s := startServer(t, newTransport(t, reg), []ucxgrpc.Option{ucxgrpc.WithService("later")})
	// WaitForReady waits for the resolver to find it.
	ctx := ctxFor(t, 20*time.Second)
	resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	if err != nil || resp.GetServerId() != s.name {
		t.Fatalf("call after the listener appeared: %v, %v", resp, err)
	}
}

// TestBuilderErrors: a bad target fails NewClient's first use cleanly.
func TestBuilderErrors(t *testing.T) {
	b := ucxgrpc.NewBuilder()
	if b.Scheme() != "ucx" {
		t.Fatalf("Scheme() = %q", b.Scheme())
	}
	ct := newTransport(t, registry.NewMemory())
	cc := dial(t, "ucx:///", ucxgrpc.WithUCX(ucxgrpc.WithTransport(ct)))
	_, err := testgrpc.NewTestServiceClient(cc).EmptyCall(context.Background(), &testgrpc.Empty{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("empty target: %v, want Unavailable", err)
	}
}
