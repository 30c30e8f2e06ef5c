package ucxgrpc

import (
	_ "unsafe" // for go:linkname

	"google.golang.org/grpc"
)

// grpcJoinDialOptions is grpc-go's internal hook that combines several dial
// options into one (internal.JoinDialOptions, set by package grpc to its
// newJoinDialOption; grpc's own stats/opentelemetry uses it). grpc has no
// public way to return two dial options as one, which WithUCX needs.
//
//go:linkname grpcJoinDialOptions google.golang.org/grpc/internal.JoinDialOptions
var grpcJoinDialOptions any

// joinDialOptions returns one dial option applying opts in order.
func joinDialOptions(opts ...grpc.DialOption) grpc.DialOption {
	join, ok := grpcJoinDialOptions.(func(...grpc.DialOption) grpc.DialOption)
	if !ok {
		panic("ucxgrpc: this grpc version lacks internal.JoinDialOptions; use ucxgrpc.DialOptions instead of WithUCX")
	}
	return join(opts...)
}
