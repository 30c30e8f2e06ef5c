package ucxconf

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func has(ss []Setting, name string) (string, bool) {
	for _, s := range ss {
		if s.Name == name {
			return s.Value, true
		}
	}
	return "", false
}

// skipIfSegmentsSet skips t when the environment sets a segment size:
// t checks ucxnet's own choice.
func skipIfSegmentsSet(t *testing.T) {
	t.Helper()
	for _, n := range append(Shm.Names(), TCP.Names()...) {
		if _, set := os.LookupEnv("UCX_" + n); set {
			t.Skipf("UCX_%s is set in the environment; this test checks ucxnet's own choice", n)
		}
	}
}

// ucxnet sizes shared-memory and TCP receive segments and cuts frames to
// fit whichever segment is in force — its own or the user's — never beyond
// what UCX 1.13 can carry in one shared-memory FIFO element.
func TestSegments(t *testing.T) {
	skipIfSegmentsSet(t)
	const rel = "1.13.1"
	tls := os.Getenv("UCX_TLS")
	v, ok := has(Settings(nil, rel), "MM_SEG_SIZE")
	require.Equal(t, SharedMemoryEnabled(tls), ok)
	if ok {
		require.Equal(t, "33024", v)
	}
	v, ok = has(Settings(nil, rel), "RX_SEG_SIZE")
	require.Equal(t, TCPEnabled(tls), ok)
	if ok {
		require.Equal(t, "1049600", v)
	}
	require.Equal(t, 32<<10, Shm.Frame(nil))
	require.Equal(t, 1<<20, TCP.Frame(nil))
	user := map[string]string{"SYSV_SEG_SIZE": "8256", "TCP_RX_SEG_SIZE": "64k"}
	v, _ = has(Settings(user, rel), "MM_SEG_SIZE")
	require.Equal(t, "8256", v, "the user's segment size wins")
	v, _ = has(Settings(user, rel), "RX_SEG_SIZE")
	require.Equal(t, "64k", v, "the user's segment size wins")
	require.Equal(t, 8000, Shm.Frame(user))
	require.Equal(t, 63<<10, TCP.Frame(user))
	require.Equal(t, 16<<10-256, Shm.Frame(map[string]string{"MM_SEG_SIZE": "16k"}))
	require.Equal(t, 1<<16-1-256, Shm.Frame(map[string]string{"MM_SEG_SIZE": "1m"}))
	require.Equal(t, 8000, Shm.Frame(map[string]string{"MM_SEG_SIZE": "lots"}))
	require.Equal(t, 8000, Shm.DefaultFrame())
	require.Equal(t, 63<<10, TCP.DefaultFrame())
	for in, want := range map[string]int{"8256": 8256, "64k": 64 << 10, "64KB": 64 << 10, "2m": 2 << 20, "100b": 100, "x": 0, "-1": 0, "": 0} {
		require.Equal(t, want, parseMemUnits(in), "%q", in)
	}
	// A segment size given in Config.UCX under a name UCX ignores through
	// ucp_config_modify is passed under the one it honours.
	for _, alias := range []string{"SYSV_SEG_SIZE", "POSIX_SEG_SIZE", "MM_SEG_SIZE"} {
		ss := Settings(map[string]string{alias: "16k"}, rel)
		v, ok := has(ss, "MM_SEG_SIZE")
		require.True(t, ok, alias)
		require.Equal(t, "16k", v, alias)
		_, ok = has(ss, alias)
		require.Equal(t, alias == "MM_SEG_SIZE", ok, alias)
	}
	v, ok = has(Settings(map[string]string{"TCP_RX_SEG_SIZE": "256k"}, rel), "RX_SEG_SIZE")
	require.True(t, ok)
	require.Equal(t, "256k", v)
	// Config.UCX's TLS, not the environment's, decides which transports'
	// segment sizes are set.
	for _, c := range []struct {
		tls      string
		shm, tcp bool
	}{{"tcp", false, true}, {"sm", true, false}} {
		ss := Settings(map[string]string{"TLS": c.tls}, rel)
		_, ok := has(ss, "MM_SEG_SIZE")
		require.Equal(t, c.shm, ok, "Config TLS=%s", c.tls)
		_, ok = has(ss, "RX_SEG_SIZE")
		require.Equal(t, c.tcp, ok, "Config TLS=%s", c.tls)
	}
}

// The tcp segment's name for ucp_config_modify follows the release: the
// short name up to 1.17, the whole one from 1.18 on; the environment's
// name is the whole one either way.
func TestSegmentNameByRelease(t *testing.T) {
	skipIfSegmentsSet(t)
	for rel, want := range map[string]string{"1.13.1": "RX_SEG_SIZE", "1.17.0": "RX_SEG_SIZE", "1.18.1": "TCP_RX_SEG_SIZE", "1.22.0": "TCP_RX_SEG_SIZE", "2.0.0": "TCP_RX_SEG_SIZE", "": "RX_SEG_SIZE"} {
		require.Equal(t, want, TCP.ModifyName(rel), rel)
		require.Equal(t, "MM_SEG_SIZE", Shm.ModifyName(rel), rel)
		_, ok := has(Settings(map[string]string{"TLS": "tcp", "RX_SEG_SIZE": "64k"}, rel), want)
		require.True(t, ok, rel)
		env := EnvDefaults(rel)
		if TCPEnabled(os.Getenv("UCX_TLS")) {
			require.Equal(t, "1049600", env["UCX_TCP_RX_SEG_SIZE"], rel)
		}
	}
}

func TestTLSSelects(t *testing.T) {
	for _, c := range []struct {
		tls string
		tcp bool
		shm bool
	}{
		{"", true, true}, {"tcp", true, false}, {"sm", false, true}, {"sm,tcp", true, true},
		{"all", true, true}, {"^tcp", false, true}, {"^sm", true, false}, {"posix,self", false, true},
		{"^knem", true, true}, {"^xpmem,knem", true, true}, {"^posix", true, true}, {"^posix,sysv", true, true},
		{"^posix,sysv,xpmem", true, false}, {"^mm", true, false}, {"shm,tcp", true, true}, {"self,cma", false, false},
		{"^all", false, false},
	} {
		require.Equal(t, c.tcp, TCPEnabled(c.tls), "%q", c.tls)
		require.Equal(t, c.shm, SharedMemoryEnabled(c.tls), "%q", c.tls)
	}
}

func TestReleaseWarning(t *testing.T) {
	for _, c := range []struct {
		loaded, built string
		warn          string // a word the warning must hold; "" for none
	}{
		{"1.13.1", "1.13", ""},
		{"1.18.1", "1.13", ""}, // newer than the headers: fine
		{"1.13.1", "1.18", "older"},
		{"2.0.0", "1.18", "major"},
		{"", "1.13", ""},
		{"garbage", "1.13", ""},
	} {
		got := ReleaseWarning(c.loaded, c.built)
		if c.warn == "" {
			require.Empty(t, got, "%s loaded, built for %s", c.loaded, c.built)
			continue
		}
		require.Contains(t, got, c.warn, "%s loaded, built for %s", c.loaded, c.built)
		require.Contains(t, got, c.loaded)
	}
}

// TestLoopbackTCPClash: the one mixed pair UCX itself cannot carry (a UCX
// 1.22 dialer, a listener of 1.21 or older, only tcp over loopback between
// them: the listener aborts) is refused by the dialer; every other pair is
// tried.
func TestLoopbackTCPClash(t *testing.T) {
	for _, c := range []struct {
		ours, theirs string
		sameHost     bool
		tcpOnly      bool
		devs         string
		clash        bool
	}{
		{"1.22.0", "1.18.1", true, true, "", true},
		{"1.22.0", "1.13.1", true, true, "lo", true},
		{"1.22.0", "1.15", true, true, "eth0,lo", true},
		{"1.23.1", "1.21.0", true, true, "all", true},
		{"1.22.0", "1.18.1", true, true, "eth0", false}, // no loopback: works
		{"1.22.0", "1.18.1", true, false, "", false},    // shared memory allowed: works
		{"1.22.0", "1.18.1", false, true, "", false},    // another host: not loopback
		{"1.18.1", "1.22.0", true, true, "", false},     // the other direction works
		{"1.22.0", "1.22.0", true, true, "", false},     // same release
		{"1.22.0", "", true, true, "", false},           // unknown: tried
		{"", "1.18.1", true, true, "", false},           // no UCX here
	} {
		if got := LoopbackTCPClash(c.ours, c.theirs, c.sameHost, c.tcpOnly, c.devs); got != c.clash {
			t.Errorf("%+v: clash = %v", c, got)
		}
	}
}

// UCX's tcp transport gets non-blocking connects unless the user chose:
// a blocking connect refused during a reconnect aborts UCX 1.13 (ConnNB).
func TestConnNBDefault(t *testing.T) {
	if _, set := os.LookupEnv("UCX_TCP_CONN_NB"); set {
		t.Skip("UCX_TCP_CONN_NB is set in the environment; this test checks ucxnet's own choice")
	}
	for rel, name := range map[string]string{"1.13.1": "CONN_NB", "1.17.0": "CONN_NB", "1.18.1": "TCP_CONN_NB", "1.22.0": "TCP_CONN_NB"} {
		v, ok := has(Settings(map[string]string{"TLS": "tcp"}, rel), name)
		require.True(t, ok, rel)
		require.Equal(t, "y", v, rel)
		_, ok = has(Settings(map[string]string{"TLS": "sm"}, rel), name)
		require.False(t, ok, "%s: no tcp setting without tcp", rel)
		for _, user := range []string{"CONN_NB", "TCP_CONN_NB"} {
			ss := Settings(map[string]string{"TLS": "tcp", user: "n"}, rel)
			v, ok = has(ss, name)
			require.True(t, ok, "%s %s", rel, user)
			require.Equal(t, "n", v, "%s: the user's %s wins", rel, user)
			require.Len(t, ss, len(Settings(map[string]string{"TLS": "tcp"}, rel)), "%s %s: once, in place of the default", rel, user)
		}
	}
	t.Setenv("UCX_TCP_CONN_NB", "n")
	_, ok := has(Settings(map[string]string{"TLS": "tcp"}, "1.13.1"), "CONN_NB")
	require.False(t, ok, "the environment's UCX_TCP_CONN_NB wins")
}

func TestEnvDefaultsNamesConnNB(t *testing.T) {
	if _, set := os.LookupEnv("UCX_TCP_CONN_NB"); set {
		t.Skip("UCX_TCP_CONN_NB is set in the environment")
	}
	t.Setenv("UCX_TLS", "tcp")
	for _, rel := range []string{"1.13.1", "1.18.1"} {
		require.Equal(t, "y", EnvDefaults(rel)["UCX_TCP_CONN_NB"], rel)
	}
}

// From UCX 1.18 on ucxnet chooses UCP's earlier protocol selection
// (ProtoEnable), unless the environment or the user chose.
func TestProtoEnableDefault(t *testing.T) {
	if _, set := os.LookupEnv("UCX_PROTO_ENABLE"); set {
		t.Skip("UCX_PROTO_ENABLE is set in the environment; this test checks ucxnet's own choice")
	}
	for rel, want := range map[string]bool{"1.13.1": false, "1.17.0": false, "1.18.1": true, "1.22.0": true, "2.0.0": true, "": false} {
		for _, tls := range []string{"tcp", "sm", ""} {
			v, ok := has(Settings(map[string]string{"TLS": tls}, rel), ProtoEnable)
			require.Equal(t, want, ok, "%s UCX_TLS=%q", rel, tls)
			if want {
				require.Equal(t, "n", v, rel)
				require.Equal(t, "n", EnvDefaults(rel)["UCX_PROTO_ENABLE"], rel)
			}
		}
	}
	ss := Settings(map[string]string{ProtoEnable: "y"}, "1.18.1")
	v, _ := has(ss, ProtoEnable)
	require.Equal(t, "y", v, "the user's choice wins")
	require.Len(t, ss, len(Settings(nil, "1.18.1")), "once, in place of the default")
	t.Setenv("UCX_PROTO_ENABLE", "y")
	_, ok := has(Settings(nil, "1.18.1"), ProtoEnable)
	require.False(t, ok, "the environment's UCX_PROTO_ENABLE wins")
}
