package recipes

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// startRedis runs redis-server on a Unix socket in a temporary directory
// (no TCP port, no persistence) until the test ends, and returns the
// socket's path.
func startRedis(t *testing.T) string {
	bin := lookPath(t, "redis-server", "make deps installs it; Debian: apt-get install redis-server")
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	var out output
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFile(t, sock, out.String)
	return sock
}

// fillPool makes the client open n conns, by holding n at once, and
// puts them back in its pool.
func fillPool(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	var held []*redis.Conn
	for range n {
		cn := c.Conn()
		if err := cn.Ping(ctxFor(t, 10*time.Second)).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
		held = append(held, cn)
	}
	for _, cn := range held {
		cn.Close()
	}
	if got := c.PoolStats().IdleConns; got != uint32(n) {
		t.Fatalf("the pool holds %d idle conns, want %d", got, n)
	}
}

// killClients has the server drop every normal client (CLIENT KILL
// TYPE NORMAL) but the admin conn it is sent on, and returns how many.
func killClients(t *testing.T, sock string) int64 {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer admin.Close()
	n, err := admin.Do(ctxFor(t, 10*time.Second), "CLIENT", "KILL", "TYPE", "NORMAL", "SKIPME", "yes").Int64()
	if err != nil {
		t.Fatalf("CLIENT KILL: %v", err)
	}
	return n
}

// commands runs n INCRs and returns how many failed.
func commands(t *testing.T, c *redis.Client, key string, n int) (failed int, last error) {
	for range n {
		if err := c.Incr(ctxFor(t, 10*time.Second), key).Err(); err != nil {
			failed++
			last = err
		}
	}
	return failed, last
}

// TestRedisPoolAfterClientKill: after the server killed every pooled conn,
// a client loses no command, and each INCR counts once: with RedisOptions,
// and with go-redis's defaults and a plain Dialer, whose pool health check
// reads a ucxnet conn's SyscallConn (a readiness descriptor on the UCX
// lane, the socket on the kernel-TCP lane) and so drops the dead conns.
func TestRedisPoolAfterClientKill(t *testing.T) {
	sock := startRedis(t)
	p := newPair(t, nil)
	ln := p.listen(t)
	forward(t, ln, sock)
	const pool = 6

	t.Run("recipe", func(t *testing.T) {
		c := redis.NewClient(RedisOptions(p.dialer, ln.Addr().String(), pool))
		defer c.Close()
		fillPool(t, c, pool)
		if n := killClients(t, sock); n != pool {
			t.Fatalf("CLIENT KILL killed %d clients, want %d", n, pool)
		}
		if failed, err := commands(t, c, "recipe", 3*pool); failed != 0 {
			t.Fatalf("%d of %d commands failed after CLIENT KILL, the last with: %v", failed, 3*pool, err)
		}
		if n, err := c.Get(ctxFor(t, 10*time.Second), "recipe").Int(); err != nil || n != 3*pool {
			t.Fatalf("INCR counted %d (%v), want %d", n, err, 3*pool)
		}
	})

	// go-redis's defaults with a plain Dialer. The health check must also
	// find live conns healthy: a pool that took every conn for dead would
	// pass too, dialing anew for each command.
	t.Run("defaults", func(t *testing.T) {
		var dials atomic.Int64
		c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), PoolSize: pool,
			Dialer: func(ctx context.Context, _, addr string) (net.Conn, error) {
				dials.Add(1)
				return p.dialer.DialContext(ctx, ucxnet.Network, addr)
			}})
		defer c.Close()
		fillPool(t, c, pool)
		if n := killClients(t, sock); n != pool {
			t.Fatalf("CLIENT KILL killed %d clients, want %d", n, pool)
		}
		if failed, err := commands(t, c, "defaults", 3*pool); failed != 0 {
			t.Fatalf("go-redis's defaults: %d of %d commands failed after CLIENT KILL, the last with: %v", failed, 3*pool, err)
		}
		if n := dials.Load(); n > 2*pool {
			t.Fatalf("%d dials for a pool of %d killed once: the health check takes live conns for dead", n, pool)
		}
	})
}
