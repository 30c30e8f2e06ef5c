package session

import (
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/ucxnet/ucxnet/registry"
)

func TestUCXLibraryWarning(t *testing.T) {
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
		got := UCXLibrary{Version: c.loaded, BuiltFor: c.built}.Warning()
		if c.warn == "" {
			require.Empty(t, got, "%s loaded, built for %s", c.loaded, c.built)
			continue
		}
		require.Contains(t, got, c.warn, "%s loaded, built for %s", c.loaded, c.built)
		require.Contains(t, got, c.loaded)
	}
}

// TestListenerPublishesUCXRelease: a listener's registry entry names the
// UCX release it runs, without touching the application's Meta map; a dial
// that fails against another release names both.
func TestListenerPublishesUCXRelease(t *testing.T) {
	needUCX(t)
	reg := registry.NewMemory()
	tr, err := newUCXTransport(Config{Registry: reg})
	require.NoError(t, err)
	defer tr.Close()
	meta := map[string]string{"app": "x"}
	ln, err := (&ListenConfig{Transport: tr, Meta: meta}).Listen(t.Context(), "")
	require.NoError(t, err)
	defer ln.Close()
	e, err := reg.Resolve(t.Context(), ln.Addr().String())
	require.NoError(t, err)
	require.Equal(t, testLib().Version, e.Meta[MetaUCXRelease])
	require.Equal(t, "x", e.Meta["app"])
	require.Equal(t, map[string]string{"app": "x"}, meta, "the application's map was changed")

	require.Empty(t, tr.releasePair(e), "same release")
	e.Meta[MetaUCXRelease] = "1.99.0"
	got := tr.releasePair(e)
	require.True(t, strings.Contains(got, "1.99.0") && strings.Contains(got, testLib().Version), got)
}

// TestLogUnusableAddressOnce: a dialer of another UCX release whose address
// this process cannot take is logged once per release, naming both
// releases; this process's own release (a forgery) is not logged.
func TestLogUnusableAddressOnce(t *testing.T) {
	var buf strings.Builder
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	loggedReleases.Delete("1.77.0")
	bad := errors.New("ucxnet: malformed UCX worker address: at byte 3: ...")
	logUnusableAddress(testLib().Version, "1.77.0", bad)
	logUnusableAddress(testLib().Version, "1.77.0", bad)
	logUnusableAddress(testLib().Version, testLib().Version, bad)
	logUnusableAddress(testLib().Version, "", bad)
	out := buf.String()
	require.Equal(t, 1, strings.Count(out, "peer_ucx="), out)
	require.Contains(t, out, "peer_ucx=1.77.0")
	require.Contains(t, out, "ucx="+testLib().Version)
}

// TestListenerRelease: the listener's release from its registry entry's
// meta, else from the address its UCX packed.
func TestListenerRelease(t *testing.T) {
	golden := func(rel, name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "cucx", "testdata", "addr", rel, name+".hex"))
		require.NoError(t, err)
		a, err := hex.DecodeString(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		return a
	}
	require.Equal(t, "1.2.3", testUCX.listenerRelease(registry.Entry{Meta: map[string]string{MetaUCXRelease: "1.2.3"}}))
	require.Equal(t, "1.18", testUCX.listenerRelease(registry.Entry{Address: golden("1.18.1", "tcp")}))
	require.Equal(t, "1.22", testUCX.listenerRelease(registry.Entry{Address: golden("1.22.0", "sm-v2")}))
	require.Equal(t, "1.15", testUCX.listenerRelease(registry.Entry{Address: golden("1.13.1", "tcp")}))
	require.Equal(t, "", testUCX.listenerRelease(registry.Entry{Address: []byte{0xff}}))
}

// A transport needs a whole UCX binding: one that lacks a function it
// would call fails NewTransport with a clear error, before anything starts.
func TestNewTransportIncompleteBinding(t *testing.T) {
	b := testUCX
	b.Offer = nil
	for _, bad := range []UCXBinding{{}, b} {
		tr, err := NewTransport(Config{Registry: registry.NewMemory(), StatsDir: StatsOff}, bad)
		require.ErrorIs(t, err, errNoBinding)
		require.Nil(t, tr)
	}
}
