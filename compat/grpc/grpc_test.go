package ucxgrpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

var sizes = []int{0, 1, 4 << 10, 1 << 20, 16<<20 + 7}

// TestDropIn uses nothing from ucxgrpc: a ucxnet listener for Serve and a
// ucxnet Dialer for grpc.WithContextDialer.
func TestDropIn(t *testing.T) {
	reg := registry.NewMemory()
	st, ct := newTransport(t, reg), newTransport(t, reg)
	lc := ucxnet.ListenConfig{Transport: st}
	ln, err := lc.Listen(context.Background(), "ucx", "")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, newTestServer("dropin"))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	dialer := &ucxnet.Dialer{Transport: ct}
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dialer.DialContext(ctx, "ucx", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var p peer.Peer
	resp, err := testgrpc.NewTestServiceClient(cc).UnaryCall(ctxFor(t, 10*time.Second),
		&testgrpc.SimpleRequest{ResponseSize: 5, Payload: &testgrpc.Payload{Body: []byte("hello")}}, grpc.Peer(&p))
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.GetPayload().GetBody()) != "hello" || resp.GetServerId() != "dropin" {
		t.Fatalf("reply %q from %q", resp.GetPayload().GetBody(), resp.GetServerId())
	}
	// The peer's address is "name:id", which middleware can split.
	host, _, err := net.SplitHostPort(p.Addr.String())
	if p.Addr.Network() != "ucx" || err != nil || host != ln.Addr().String() {
		t.Fatalf("peer %s %s (%v), want ucx %s:<conn id>", p.Addr.Network(), p.Addr, err, ln.Addr())
	}
}

func TestUnary(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range sizes {
		ctx := ctxFor(t, 60*time.Second)
		in := pattern(n)
		resp, err := e.client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: int32(n), Payload: &testgrpc.Payload{Body: in}})
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		checkPattern(t, resp.GetPayload().GetBody(), n)
	}
	// A status error crosses unchanged.
	_, err := e.client.UnaryCall(ctxFor(t, 10*time.Second), &testgrpc.SimpleRequest{
		ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.FailedPrecondition), Message: "no"}})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "no" {
		t.Fatalf("status error: got %v", err)
	}
	// Over the limit is refused as gRPC does over TCP.
	_, err = e.client.UnaryCall(ctxFor(t, 30*time.Second), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: make([]byte, maxMsg+1)}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: got %v, want ResourceExhausted", err)
	}
}

func TestServerStreaming(t *testing.T) {
	e := newEnv(t, nil)
	req := &testgrpc.StreamingOutputCallRequest{}
	for _, n := range sizes {
		req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: int32(n)})
	}
	stream, err := e.client.StreamingOutputCall(ctxFor(t, 60*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv %d bytes: %v", n, err)
		}
		checkPattern(t, resp.GetPayload().GetBody(), n)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

func TestClientStreaming(t *testing.T) {
	e := newEnv(t, nil)
	stream, err := e.client.StreamingInputCall(ctxFor(t, 60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range sizes {
		if err := stream.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: pattern(n)}}); err != nil {
			t.Fatalf("Send %d bytes: %v", n, err)
		}
		total += n
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if int(resp.GetAggregatedPayloadSize()) != total {
		t.Fatalf("server got %d bytes, want %d", resp.GetAggregatedPayloadSize(), total)
	}
}

func TestBidiStreaming(t *testing.T) {
	e := newEnv(t, nil)
	stream, err := e.client.FullDuplexCall(ctxFor(t, 60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		err := stream.Send(&testgrpc.StreamingOutputCallRequest{
			Payload:            &testgrpc.Payload{Body: pattern(n)},
			ResponseParameters: []*testgrpc.ResponseParameters{{Size: int32(n)}, {Size: 3}},
		})
		if err != nil {
			t.Fatalf("Send %d bytes: %v", n, err)
		}
		for _, want := range []int{n, 3} {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			checkPattern(t, resp.GetPayload().GetBody(), want)
		}
	}
	md, err := stream.Header()
	if err != nil || len(md.Get(mdServer)) != 1 || md.Get(mdServer)[0] != e.s.name {
		t.Fatalf("header %v, %v", md, err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

// TestConcurrentStreams holds 1,000 bidi streams open at once on one
// ClientConn (one ucxnet conn) and then finishes them.
func TestConcurrentStreams(t *testing.T) {
	const n = 1000
	e := newEnv(t, nil)
	ctx := ctxFor(t, 60*time.Second)
	// Connect first so that the streams do not race the handshake.
	if _, err := e.client.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	var opened, finish sync.WaitGroup
	opened.Add(n)
	finish.Add(n)
	release := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			defer finish.Done()
			ok := false
			defer func() {
				if !ok {
					opened.Done()
				}
			}()
			stream, err := e.client.FullDuplexCall(ctx)
			if err != nil {
				errs <- err
				return
			}
			size := int32(i % 512)
			if err := stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: size}}}); err != nil {
				errs <- err
				return
			}
			resp, err := stream.Recv()
			if err != nil || len(resp.GetPayload().GetBody()) != int(size) {
				errs <- errors.Join(errors.New("first reply"), err)
				return
			}
			ok = true
			opened.Done()
			<-release // every stream is open now
			if err := stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}}); err != nil {
				errs <- err
				return
			}
			if _, err := stream.Recv(); err != nil {
				errs <- err
				return
			}
			stream.CloseSend()
			if _, err := stream.Recv(); err != io.EOF {
				errs <- errors.Join(errors.New("want io.EOF"), err)
			}
		}()
	}
	opened.Wait()
	close(release)
	finish.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := e.ct.Stats().OpenConns; got != 1 {
		t.Errorf("client transport has %d conns open, want the 1 gRPC multiplexes on", got)
	}
}

func TestDeadline(t *testing.T) {
	e := newEnv(t, nil)
	// Unary: the server blocks until the deadline.
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), mdBlock, "1"), 200*time.Millisecond)
	defer cancel()
	_, err := e.client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("unary past its deadline: %v, want DeadlineExceeded", err)
	}
	waitDeadlineEnded(t, e.s.ts)

	// Server streaming: the deadline falls mid-stream.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := &testgrpc.StreamingOutputCallRequest{}
	for range 1000 {
		req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: 10, IntervalUs: 20000})
	}
	stream, err := e.client.StreamingOutputCall(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
		got++
	}
	if status.Code(err) != codes.DeadlineExceeded || got == 0 || got >= len(req.ResponseParameters) {
		t.Fatalf("stream past its deadline: %v after %d messages, want DeadlineExceeded mid-stream", err, got)
	}
	waitDeadlineEnded(t, e.s.ts)
}

// waitDeadlineEnded waits for a server handler to see its context end
// because of the client's deadline: the server's own timer (grpc-timeout)
// and the client's RST_STREAM race, so its context reports
// DeadlineExceeded or Canceled.
func waitDeadlineEnded(t *testing.T, ts *testServer) {
	t.Helper()
	if err := waitEnded(t, ts); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("server handler's context ended with %v", err)
	}
}

func TestCancelMidStream(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(ctxFor(t, 30*time.Second))
	stream, err := e.client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 100}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel: %v, want Canceled", err)
	}
	if err := waitEnded(t, e.s.ts); !errors.Is(err, context.Canceled) {
		t.Fatalf("server handler's context ended with %v, want context.Canceled", err)
	}
	// The conn survives: the next call works.
	if _, err := e.client.EmptyCall(ctxFor(t, 10*time.Second), &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
}

// openGated starts n server streams that send one message and then wait
// for the server's gate, and returns them once each has its first message.
func openGated(t *testing.T, e *env, n int) []testgrpc.TestService_StreamingOutputCallClient {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(ctxFor(t, 30*time.Second), mdGate, "1")
	var streams []testgrpc.TestService_StreamingOutputCallClient
	for range n {
		s, err := e.client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{
			ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	return streams
}

func TestGracefulStop(t *testing.T) {
	e := newEnv(t, nil)
	streams := openGated(t, e, 5)
	stopped := make(chan struct{})
	go func() {
		e.s.srv.GracefulStop()
		close(stopped)
	}()
	// The listener closes at once: the name is unpublished.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := e.reg.Resolve(context.Background(), e.s.name); errors.Is(err, registry.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("GracefulStop did not close the listener")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with streams in flight")
	default:
	}
	close(e.s.ts.gate)
	for i, s := range streams {
		for _, n := range []int{2, 3} {
			resp, err := s.Recv()
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			checkPattern(t, resp.GetPayload().GetBody(), n)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("stream %d ended with %v, want io.EOF", i, err)
		}
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop did not return after the streams finished")
	}
}

func TestStop(t *testing.T) {
	e := newEnv(t, nil)
	streams := openGated(t, e, 5)
	e.s.srv.Stop()
	for i, s := range streams {
		_, err := s.Recv()
		// grpc-go's Stop closes the server transport: the client reads EOF
		// on the conn and fails its streams with Unavailable.
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("stream %d after Stop: %v, want Unavailable", i, err)
		}
	}
	for range streams {
		if err := waitEnded(t, e.s.ts); !errors.Is(err, context.Canceled) {
			t.Fatalf("aborted handler's context ended with %v", err)
		}
	}
	// Nobody listens any more: a new call fails fast.
	_, err := e.client.EmptyCall(ctxFor(t, 10*time.Second), &testgrpc.Empty{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call after Stop: %v, want Unavailable", err)
	}
}

// selfSigned returns a TLS certificate for host and a pool trusting it.
func selfSigned(t *testing.T, host string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func TestTLS(t *testing.T) {
	const host = "orders.ucxgrpc.test"
	cert, pool := selfSigned(t, host)
	e := newEnv(t,
		[]grpc.ServerOption{grpc.Creds(credentials.NewServerTLSFromCert(&cert))},
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: host})))
	var p peer.Peer
	resp, err := e.client.UnaryCall(ctxFor(t, 30*time.Second),
		&testgrpc.SimpleRequest{ResponseSize: 1 << 20, Payload: &testgrpc.Payload{Body: pattern(1 << 20)}}, grpc.Peer(&p))
	if err != nil {
		t.Fatal(err)
	}
	checkPattern(t, resp.GetPayload().GetBody(), 1<<20)
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || !info.State.HandshakeComplete || info.State.ServerName != host {
		t.Fatalf("peer auth info %#v, want a completed TLS handshake with %s", p.AuthInfo, host)
	}

	// A client that does not trust the certificate is refused.
	d := &ucxnet.Dialer{Transport: e.ct, Timeout: 10 * time.Second}
	cc := dial(t, "passthrough:///"+e.s.name,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: host})),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "ucx", a) }))
	_, err = testgrpc.NewTestServiceClient(cc).EmptyCall(ctxFor(t, 10*time.Second), &testgrpc.Empty{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("untrusted certificate: %v, want Unavailable", err)
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t, nil)
	const svc = "grpc.testing.TestService"
	e.s.health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	hc := healthpb.NewHealthClient(e.cc)
	ctx := ctxFor(t, 30*time.Second)
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v, %v", resp, err)
	}
	resp, err = hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check of the server: %v, %v", resp, err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Check of an unknown service: %v, want NotFound", err)
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v, %v", r, err)
	}
	e.s.health.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	if r, err := w.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after NOT_SERVING: %v, %v", r, err)
	}
}
