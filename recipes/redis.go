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
// go-redis checks an idle pooled conn's health before reusing it only
// when the conn is a syscall.Conn (it peeks at the socket); a ucxnet conn
// is not one. A conn the server closed while it sat in the pool (CLIENT
// KILL, the server's idle timeout, a restart) is then found dead by the
// command that takes it: that command's read ends with EOF. go-redis
// retries on EOF, by default 3 times with a backoff, so after the server
// dropped every pooled conn, the first commands each met 4 dead conns and
// failed. These options let a command pass every pooled conn that can be
// dead: MaxRetries is the pool size, and the retries come at once
// (MinRetryBackoff -1: the conn that failed was dead before the command
// was sent, and the next attempt takes another conn or dials a new one).
// Other errors that go-redis retries (a dial that fails, a timeout) are
// then retried poolSize times too, without backoff; a server that is down
// refuses each dial at once (ECONNREFUSED). A server that closes idle
// clients (redis.conf's timeout) needs no retry at all if ConnMaxIdleTime
// is set below that timeout: go-redis then drops such conns itself.
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
