package session

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/cucx"
	"github.com/ucxnet/ucxnet/internal/stream"
	"github.com/ucxnet/ucxnet/registry"
)

// Attacks of hostile peers that need real UCX.

const relabelEnv = "UCXNET_TEST_RELABEL"

// relabelled returns copies of addr in which the self interface carries
// another transport's checksum (tcp's, posix's): addresses that pass
// cucx.ValidateAddress, and that UCX 1.13 hands to that transport's
// is_reachable with a NULL device address.
func relabelled(t testing.TB, addr []byte) map[string][]byte {
	self := cucx.TransportChecksum("self")
	out := map[string][]byte{}
	for _, to := range []string{"tcp", "posix"} {
		cs := cucx.TransportChecksum(to)
		for i := 0; i+1 < len(addr); i++ {
			if uint16(addr[i])|uint16(addr[i+1])<<8 != self {
				continue
			}
			f := append([]byte(nil), addr...)
			f[i], f[i+1] = byte(cs), byte(cs>>8)
			es, err := cucx.AddressTransports(f)
			if err != nil {
				continue
			}
			for _, e := range es {
				if e.Name == to && e.DevLen == 0 {
					out["self as "+to] = f
				}
			}
		}
	}
	if len(out) == 0 {
		t.Skip("this worker's address has no self interface (UCX_TLS excludes it)")
	}
	return out
}

// TestAttackRelabelledTransportHelper is not a test: it runs the attack of
// TestAttackRelabelledTransport in a child process.
func TestAttackRelabelledTransportHelper(t *testing.T) {
	if os.Getenv(relabelEnv) == "" {
		t.Skip("helper process for TestAttackRelabelledTransport; runs only as its child")
	}
	reg := registry.NewMemory()
	p := newPair(t, Config{Registry: reg})
	raw := newRawPeer(t, p.server)
	imp := newRawPeer(t, p.client)
	require.NoError(t, reg.Register(t.Context(), registry.Entry{Name: "impostor", Address: imp.eng.Address()}))
	for what, addr := range relabelled(t, raw.eng.Address()) {
		require.NoError(t, cucx.ValidateAddress(addr), "%s: the forged address is well formed", what)
		for i, name := range []string{p.ln.Addr().String(), p.ln.Addr().String(), "nobody"} {
			hello := stream.Hello{ConnID: uint64(900 + i), EagerMax: 1 << 20, Window: 1 << 16, Name: name, WorkerAddr: addr}
			b, err := hello.MarshalBinary()
			require.NoError(t, err)
			raw.sendFrame(t, stream.Header{Kind: stream.KindConnect}, b)
		}
		// Through the registry: the dialer must not crash either.
		dialRefusedEntry(t, p, reg, "forged-"+strings.ReplaceAll(what, " ", "-"), addr)
		// Through a listener's ACCEPT naming the worker to continue with
		// (a dialer with one worker offers no such ACCEPT).
		for range len(p.client.shards) - 1 {
			err, _ := impostorAccept(t, p, imp, "impostor", func(int) []byte { return addr })
			require.ErrorIs(t, err, ErrProtocol, "%s in an ACCEPT", what)
		}
	}
	time.Sleep(500 * time.Millisecond) // the CONNECTs are handled by now, or would have crashed us
	requireSurvived(t, p)
}

// With UCX choosing its transports (UCX_TLS
// unset), a worker address whose self interface carries tcp's or posix's
// checksum passed ValidateAddress, and two CONNECTs carrying one (or a
// registry entry holding one) segfaulted the receiver in ucp_ep_create
// (uct_iface_local_is_reachable on a NULL device address). The child
// runs in its own network, IPC and PID namespaces with only lo, as the
// attacker did.
func TestAttackRelabelledTransport(t *testing.T) {
	needUCX(t)
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root for the namespaces")
	}
	cmd := exec.Command("unshare", "-n", "-i", "-p", "-f", "-m", "--mount-proc", "sh", "-c",
		`mount -t tmpfs tmpfs /dev/shm && ip link set lo up && exec "$0" "$@"`,
		os.Args[0], "-test.run=^TestAttackRelabelledTransportHelper$", "-test.v", "-test.count=1")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UCX_TLS=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, relabelEnv+"=1", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	require.NoError(t, err, "the attacked process died")
	require.Contains(t, string(out), "survived")
}
