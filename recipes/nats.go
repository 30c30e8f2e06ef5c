package recipes

import (
	"context"
	"net"

	"github.com/nats-io/nats-server/v2/server"
)

// ServeNATS serves the nats-server s on the ucxnet listener ln until ln's
// Accept fails (net.ErrClosed, once ln is closed, is returned as nil).
//
// nats-server takes no net.Listener of the application's; it listens on
// TCP unless its Options.DontListen is set, and then accepts only
// in-process conns (Server.InProcessConn). ServeNATS joins each ucxnet
// conn to one in-process conn, so s can run with DontListen and be reached
// only over ucxnet. Clients dial with nats.go's custom dialer:
//
//	nc, err := nats.Connect("nats://"+name, nats.SetCustomDialer(&ucxnet.Dialer{}))
//
// nats.go dials "name:4222"; ucxnet resolves that as "name".
func ServeNATS(ln net.Listener, s *server.Server) error {
	return Forward(ln, func(context.Context) (net.Conn, error) { return s.InProcessConn() })
}
