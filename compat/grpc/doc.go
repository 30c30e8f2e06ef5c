// Package ucxgrpc runs gRPC over ucxnet: RDMA, shared memory or TCP, chosen
// by UCX, under an unmodified grpc-go client and server.
//
// gRPC needs nothing from this package to run over ucxnet: a server serves
// a ucxnet listener, and a client dials through a ucxnet.Dialer given to
// grpc.WithContextDialer with the "passthrough" scheme:
//
//	ln, _ := ucxnet.Listen("ucx", "orders-1")
//	go grpcServer.Serve(ln)
//
//	var d ucxnet.Dialer
//	conn, _ := grpc.NewClient("passthrough:///orders-1",
//		grpc.WithTransportCredentials(insecure.NewCredentials()),
//		grpc.WithContextDialer(ucxgrpc.ContextDialer(&d)))
//
// What the package adds is service discovery. [Listen] publishes a listener
// as one instance of a service, and [WithUCX] installs the ucxnet dialer
// together with a resolver for the "ucx" scheme, which looks names up in
// the transport's registry:
//
//	ln, _ := ucxgrpc.Listen("", ucxgrpc.WithService("orders")) // in each server process
//
//	conn, _ := grpc.NewClient("ucx:///orders",
//		grpc.WithTransportCredentials(insecure.NewCredentials()),
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
//		ucxgrpc.WithUCX())
//
// "ucx:///orders" resolves to the listener named "orders" if there is one,
// and otherwise to every live instance of service "orders". The resolver
// polls the registry (every second by default, and whenever gRPC asks it to
// re-resolve), so new instances are picked up and instances whose process
// died drop out; with the round_robin policy calls spread over all of them.
package ucxgrpc
