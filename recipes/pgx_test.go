package recipes

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgBinDirs are where Debian's PostgreSQL keeps initdb and postgres, which
// are not on $PATH.
func pgBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	return dirs
}

// startPostgres runs a throwaway PostgreSQL cluster (trust authentication,
// no TCP, fsync off) on a Unix socket in a temporary directory until the
// test ends, and returns that directory. PostgreSQL refuses to run as
// root: as root, it runs as the "postgres" user, or the test skips.
func startPostgres(t *testing.T) string {
	const install = "Debian: apt-get install postgresql"
	initdb := lookPath(t, "initdb", install, pgBinDirs()...)
	postgres := lookPath(t, "postgres", install, pgBinDirs()...)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("PostgreSQL does not run as root, and there is no postgres user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: its parent is private to this user.
	dir, err := os.MkdirTemp("", "ucxnet-pgx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(bin string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	var out output
	cmd := run(postgres, "-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "fsync=off", "-c", "logging_collector=off")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		cmd.Wait()
	})
	// postmaster.pid's 8th line says "ready" once connections are taken.
	pid := filepath.Join(data, "postmaster.pid")
	waitFor(t, "PostgreSQL to be ready", func() bool {
		b, _ := os.ReadFile(pid)
		lines := strings.Split(string(b), "\n")
		return len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready"
	}, out.String)
	return dir
}

// TestPgx: pgx reaches PostgreSQL under a ucxnet name with PgxConfig; the
// name goes to ucxnet's registry, not to DNS.
func TestPgx(t *testing.T) {
	dir := startPostgres(t)
	p := newPair(t, nil)
	ln := p.listen(t)
	forward(t, ln, filepath.Join(dir, ".s.PGSQL.5432"))

	var looked []string
	cfg, err := PgxConfig(p.dialer, "host="+ln.Addr().String()+" user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	lookup := cfg.LookupFunc
	cfg.LookupFunc = func(ctx context.Context, host string) ([]string, error) {
		looked = append(looked, host)
		return lookup(ctx, host)
	}
	ctx := ctxFor(t, 20*time.Second)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if len(looked) != 1 || looked[0] != ln.Addr().String() {
		t.Fatalf("pgx looked up %q, want only the ucxnet name %q", looked, ln.Addr())
	}
	var s string
	if err := conn.QueryRow(ctx, "select repeat('ucxnet', 100000)").Scan(&s); err != nil {
		t.Fatalf("query: %v", err)
	}
	if len(s) != 600000 || !strings.HasPrefix(s, "ucxnetucxnet") {
		t.Fatalf("got %d bytes, want 600000", len(s))
	}
	var n int
	if err := conn.QueryRow(ctx, "select count(*) from pg_stat_activity where client_port = -1").Scan(&n); err != nil || n < 1 {
		t.Fatalf("PostgreSQL sees %d Unix-socket clients (%v), want this one", n, err)
	}
}
