// Package recipes shows, with tests that run them, how real clients and
// servers run over ucxnet: net/http, gRPC, go-redis, pgx, nats.go with an
// in-process nats-server, and OpenSSH through ProxyCommand=`ucxnet cat`.
//
// It is a nested module (github.com/ucxnet/ucxnet/recipes) so that the core
// module does not depend on these clients. Each recipe is a small function
// here, meant to be copied:
//
//   - [RedisOptions]: go-redis over ucxnet, with retries at once for a
//     pooled conn that dies between go-redis's health check and its command.
//   - [PgxConfig]: pgx over ucxnet, with a LookupFunc so that the name
//     never reaches DNS.
//   - [ServeNATS]: an in-process nats-server serving a ucxnet listener;
//     nats.go clients dial with nats.SetCustomDialer.
//   - [Forward]: serve a ucxnet name by forwarding each conn to a local
//     server (a Redis or PostgreSQL socket), as `ucxnet proxy` does.
//
// net/http, gRPC and OpenSSH need nothing beyond the core module (and
// compat/grpc for name resolution); their tests show the few lines.
//
// The tests that need a server binary (redis-server, PostgreSQL's initdb
// and postgres, ssh and sshd) skip, saying which is missing, when it is
// not installed.
package recipes
