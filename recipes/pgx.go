package recipes

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// PgxConfig parses a pgx connection string whose host is a ucxnet name
// ("host=orders-db user=app sslmode=disable") and makes pgx dial it through
// d.
//
// DialFunc alone is not enough: pgx looks the host up (LookupFunc, by
// default the system resolver) before it calls DialFunc, so the ucxnet
// name would go out to DNS and the connect would fail on the lookup. The
// LookupFunc here returns the name as it is, and DialFunc gets "name:port",
// which ucxnet resolves in its registry. Both apply to the connection
// string's fallback hosts too.
func PgxConfig(d *ucxnet.Dialer, connString string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		return []string{host}, nil
	}
	cfg.DialFunc = func(ctx context.Context, _, addr string) (net.Conn, error) {
		return d.DialContext(ctx, ucxnet.Network, addr)
	}
	return cfg, nil
}
