package ucxgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ucxgrpc "github.com/ucxnet/ucxnet/compat/grpc"
	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

const (
	maxMsg   = 64 << 20
	mdBlock  = "x-block"   // UnaryCall blocks until its context ends
	mdGate   = "x-gate"    // StreamingOutputCall waits on the gate after its first response
	mdServer = "server-id" // header FullDuplexCall sends
)

// testServer implements grpc.testing.TestService.
type testServer struct {
	testgrpc.UnimplementedTestServiceServer
	id    string
	gate  chan struct{}
	ended chan error // handlers that ended because their context did
}

func newTestServer(id string) *testServer {
	return &testServer{id: id, gate: make(chan struct{}), ended: make(chan error, 4096)}
}

func (s *testServer) note(err error) {
	select {
	case s.ended <- err:
	default:
	}
}

func has(ctx context.Context, key string) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(key)) > 0
}

// pattern returns n deterministic bytes.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + 7)
	}
	return b
}

// body is the response payload for a wanted size: the request's payload if
// it has that size, else pattern(size).
func body(size int32, req []byte) []byte {
	if int(size) == len(req) {
		return req
	}
	return pattern(int(size))
}

func (s *testServer) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

func (s *testServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if has(ctx, mdBlock) {
		<-ctx.Done()
		s.note(ctx.Err())
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if st := req.GetResponseStatus(); st.GetCode() != 0 {
		return nil, status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return &testgrpc.SimpleResponse{
		Payload:  &testgrpc.Payload{Body: body(req.GetResponseSize(), req.GetPayload().GetBody())},
		ServerId: s.id,
		Hostname: fmt.Sprint(os.Getpid()),
	}, nil
}

func (s *testServer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	ctx := stream.Context()
	for i, p := range req.GetResponseParameters() {
		if i == 1 && has(ctx, mdGate) {
			select {
			case <-s.gate:
			case <-ctx.Done():
				s.note(ctx.Err())
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		if d := time.Duration(p.GetIntervalUs()) * time.Microsecond; d > 0 {
			tm := time.NewTimer(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				s.note(ctx.Err())
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: pattern(int(p.GetSize()))}}); err != nil {
			s.note(ctx.Err())
			return err
		}
	}
	return nil
}

func (s *testServer) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	total := 0
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			s.note(stream.Context().Err())
			return err
		}
		total += len(req.GetPayload().GetBody())
	}
}

func (s *testServer) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	if err := stream.SendHeader(metadata.Pairs(mdServer, s.id)); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			s.note(stream.Context().Err())
			return err
		}
		in := req.GetPayload().GetBody()
		for _, p := range req.GetResponseParameters() {
			if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body(p.GetSize(), in)}}); err != nil {
				s.note(stream.Context().Err())
				return err
			}
		}
	}
}

// newTransport returns a transport on reg, closed when the test ends.
func newTransport(t testing.TB, reg registry.Registry) *ucxnet.Transport {
	t.Helper()
	tr, err := ucxnet.NewTransport(ucxnet.Config{Registry: reg})
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// server is a gRPC server with the test and health services on a ucxnet
// listener.
type server struct {
	srv    *grpc.Server
	ln     net.Listener
	ts     *testServer
	health *health.Server
	name   string
	served chan error
}

func startServer(t testing.TB, tr *ucxnet.Transport, lopts []ucxgrpc.Option, sopts ...grpc.ServerOption) *server {
	t.Helper()
	ln, err := ucxgrpc.Listen("", append([]ucxgrpc.Option{ucxgrpc.WithTransport(tr)}, lopts...)...)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	s := &server{
		srv:    grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg)}, sopts...)...),
		ln:     ln,
		ts:     newTestServer(ln.Addr().String()),
		health: health.NewServer(),
		name:   ln.Addr().String(),
		served: make(chan error, 1),
	}
	testgrpc.RegisterTestServiceServer(s.srv, s.ts)
	healthpb.RegisterHealthServer(s.srv, s.health)
	go func() { s.served <- s.srv.Serve(ln) }()
	t.Cleanup(func() {
		s.srv.Stop()
		if err := <-s.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// dial returns a client conn to target, closed when the test ends.
func dial(t testing.TB, target string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
	}
	cc, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", target, err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// env is one server and one client over ucxnet, each on its own transport,
// sharing an in-memory registry.
type env struct {
	reg    registry.Registry
	st, ct *ucxnet.Transport
	s      *server
	cc     *grpc.ClientConn
	client testgrpc.TestServiceClient
}

func newEnv(t testing.TB, sopts []grpc.ServerOption, dopts ...grpc.DialOption) *env {
	t.Helper()
	e := &env{reg: registry.NewMemory()}
	e.st = newTransport(t, e.reg)
	e.ct = newTransport(t, e.reg)
	e.s = startServer(t, e.st, nil, sopts...)
	d := &ucxnet.Dialer{Transport: e.ct, Timeout: 10 * time.Second}
	e.cc = dial(t, "passthrough:///"+e.s.name, append([]grpc.DialOption{grpc.WithContextDialer(ucxgrpc.ContextDialer(d))}, dopts...)...)
	e.client = testgrpc.NewTestServiceClient(e.cc)
	return e
}

// ctx returns a context that ends after d or with the test.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitEnded waits for the server to note a handler ended by its context
// and returns that context error.
func waitEnded(t testing.TB, ts *testServer) error {
	t.Helper()
	select {
	case err := <-ts.ended:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("server handler did not see its context end")
		return nil
	}
}

func checkPattern(t testing.TB, got []byte, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("payload of %d bytes, want %d", len(got), n)
	}
	for i, b := range got {
		if b != byte(i*31+7) {
			t.Fatalf("payload byte %d of %d is %#x, want %#x", i, n, b, byte(i*31+7))
		}
	}
}
