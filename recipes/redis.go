package recipes

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// RedisOptions returns go-redis options for a Redis server published under
// the ucxnet name, with a pool of poolSize conns dialed through d.
//
// go-redis checks an idle pooled conn's health before reusing it through
// syscall.Conn: a ucxnet conn's SyscallConn answers that check on both
// lanes (the socket on the kernel-TCP lane, a readiness descriptor on the
// UCX lane), so a conn the server closed while it sat in the pool (CLIENT
// KILL, the server's idle timeout) is dropped and redialed, and go-redis's
// defaults with a plain Dialer lose no command to it. These options add
// retries for what the check cannot see, a conn that dies between the
// check and the command: MaxRetries is the pool size, and the retries
// come at once (MinRetryBackoff -1: the next attempt takes another conn
// or dials a new one). Other errors that go-redis retries (a dial that
// fails, a timeout) are then retried poolSize times too, without backoff;
// a server that is down refuses each dial at once (ECONNREFUSED).
func RedisOptions(d *ucxnet.Dialer, name string, poolSize int) *redis.Options {
	return &redis.Options{
		Addr: name,
		Dialer: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return d.DialContext(ctx, ucxnet.Network, addr)
		},
		PoolSize:        poolSize,
		MaxRetries:      poolSize,
		MinRetryBackoff: -1,
	}
}
