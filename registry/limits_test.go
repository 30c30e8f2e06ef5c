package registry

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func putBody(t *testing.T, e Entry, ttlMs int64) string {
	t.Helper()
	b, err := json.Marshal(putRequest{Entry: e, TTLMs: ttlMs})
	require.NoError(t, err)
	return string(b)
}

// The attack: many PUTs with large meta. Each is refused, and
// the server holds nothing.
func TestServerRefusesLargeMeta(t *testing.T) {
	s := NewServer(ServerConfig{})
	defer s.Close()
	e := testEntry("big", "")
	e.Meta = map[string]string{"blob": strings.Repeat("x", 60<<10)}
	for i := 0; i < 50; i++ {
		e.Name = fmt.Sprintf("big-%d", i)
		w := serve(s, http.MethodPut, "/v1/entries/"+e.Name, putBody(t, e, 0), nil)
		require.Contains(t, []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, w.Code, w.Body.String())
	}
	require.Zero(t, s.Len())
	require.Zero(t, s.Bytes())

	// Just over the cap: 400 naming it; at the cap: accepted.
	e.Name = "edge"
	e.Meta = map[string]string{"k": strings.Repeat("v", MaxMetaBytes)}
	w := serve(s, http.MethodPut, "/v1/entries/edge", putBody(t, e, 0), nil)
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), fmt.Sprintf("exceeds %d", MaxMetaBytes))
	e.Meta = map[string]string{"k": strings.Repeat("v", MaxMetaBytes-1)}
	w = serve(s, http.MethodPut, "/v1/entries/edge", putBody(t, e, 0), nil)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())

	// Too many keys, and over-long service and host.
	many := map[string]string{}
	for i := 0; i <= MaxMetaKeys; i++ {
		many[fmt.Sprint(i)] = ""
	}
	for _, bad := range []Entry{
		{Name: "m", Address: []byte("a"), Meta: many},
		{Name: "s", Address: []byte("a"), Service: strings.Repeat("s", MaxNameLen+1)},
		{Name: "h", Address: []byte("a"), Host: strings.Repeat("h", MaxHostLen+1)},
	} {
		require.ErrorIs(t, bad.Validate(), ErrInvalidEntry)
		w := serve(s, http.MethodPut, "/v1/entries/"+bad.Name, putBody(t, bad, 0), nil)
		require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	}
}

// A huge ttl is refused, also when the configuration asks for more than
// the hard cap.
func TestServerTTLCap(t *testing.T) {
	s := NewServer(ServerConfig{MaxTTL: 1000 * time.Hour})
	defer s.Close()
	e := testEntry("long", "")
	for _, ms := range []int64{HardMaxLeaseTTL.Milliseconds() + 1, 1 << 62, -1} {
		w := serve(s, http.MethodPut, "/v1/entries/long", putBody(t, e, ms), nil)
		require.Equal(t, http.StatusBadRequest, w.Code, "%d: %s", ms, w.Body.String())
		require.Contains(t, w.Body.String(), "out of range")
	}
	w := serve(s, http.MethodPut, "/v1/entries/long", putBody(t, e, HardMaxLeaseTTL.Milliseconds()), nil)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())

	d := NewServer(ServerConfig{})
	defer d.Close()
	w = serve(d, http.MethodPut, "/v1/entries/long", putBody(t, e, (DefaultMaxLeaseTTL+time.Millisecond).Milliseconds()), nil)
	require.Equal(t, http.StatusBadRequest, w.Code)
}

// Filling the server: PUTs beyond the byte budget get 507, the budget is
// never exceeded, and freeing entries makes room again.
func TestServerByteBudget(t *testing.T) {
	const budget = 256 << 10
	s := NewServer(ServerConfig{MaxBytes: budget})
	defer s.Close()
	e := testEntry("x", "")
	e.Address = make([]byte, MaxAddressLen)
	e.Meta = map[string]string{"k": strings.Repeat("v", MaxMetaBytes-1)}
	var leases []string
	full := 0
	for i := 0; i < 100; i++ {
		e.Name = fmt.Sprintf("fill-%03d", i)
		w := serve(s, http.MethodPut, "/v1/entries/"+e.Name, putBody(t, e, 0), nil)
		switch w.Code {
		case http.StatusCreated:
			var lr leaseResponse
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &lr))
			leases = append(leases, lr.Lease)
		case http.StatusInsufficientStorage:
			full++
			require.Contains(t, w.Body.String(), "registry full")
		default:
			t.Fatalf("PUT %s: %d %s", e.Name, w.Code, w.Body.String())
		}
		require.LessOrEqual(t, s.Bytes(), int64(budget))
	}
	require.NotZero(t, full, "the budget must stop the writer")
	require.NotEmpty(t, leases)

	// A replacement that grows an entry past the budget is refused too.
	small := testEntry("small", "")
	w := serve(s, http.MethodPut, "/v1/entries/fill-000?lease="+leases[0], putBody(t, Entry{Name: "fill-000", Address: []byte("a")}, 0), nil)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = serve(s, http.MethodPut, "/v1/entries/small", putBody(t, small, 0), nil)
	require.Equal(t, http.StatusCreated, w.Code, "shrinking fill-000 made room: %s", w.Body.String())

	// Deleting frees the bytes.
	before := s.Bytes()
	w = serve(s, http.MethodDelete, "/v1/entries/fill-001?lease="+leases[1], "", nil)
	require.Equal(t, http.StatusNoContent, w.Code)
	require.Less(t, s.Bytes(), before)
}

// Listings are paged; the client follows the pages, and no page is
// larger than the bounds.
func TestServerPaging(t *testing.T) {
	f := newHTTPFixture(t, ServerConfig{})
	h := newHTTPClient(t, f, "")
	s := f.srv.Load()
	const n = 2345
	var want []string
	for i := 0; i < n; i++ {
		e := testEntry(fmt.Sprintf("p-%05d", i), "")
		if i%2 == 0 {
			e.Service = "even"
		}
		w := serve(s, http.MethodPut, "/v1/entries/"+e.Name, putBody(t, e, 60_000), nil)
		require.Equal(t, http.StatusCreated, w.Code)
		want = append(want, e.Name)
	}

	w := serve(s, http.MethodGet, "/v1/entries", "", nil)
	var page []Entry
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
	require.Len(t, page, DefaultPageLimit)
	next, err := url.QueryUnescape(w.Header().Get(HeaderNextPage))
	require.NoError(t, err)
	require.Equal(t, page[len(page)-1].Name, next)

	w = serve(s, http.MethodGet, "/v1/entries?limit=99999", "", nil)
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
	require.Len(t, page, MaxPageLimit)
	for _, bad := range []string{"0", "-1", "x"} {
		w = serve(s, http.MethodGet, "/v1/entries?limit="+bad, "", nil)
		require.Equal(t, http.StatusBadRequest, w.Code, bad)
	}

	all, err := h.List(context.Background())
	require.NoError(t, err)
	var got []string
	for _, e := range all {
		got = append(got, e.Name)
	}
	require.Equal(t, want, got)

	even, err := h.Instances(context.Background(), "even")
	require.NoError(t, err)
	require.Len(t, even, (n+1)/2)
	require.True(t, sort.SliceIsSorted(even, func(i, j int) bool { return even[i].Name < even[j].Name }))

	// Large entries: a page stops at MaxPageBytes.
	big := testEntry("zz-big", "")
	big.Address = make([]byte, MaxAddressLen)
	for i := 0; i < 200; i++ {
		big.Name = fmt.Sprintf("zz-big-%03d", i)
		w := serve(s, http.MethodPut, "/v1/entries/"+big.Name, putBody(t, big, 60_000), nil)
		require.Equal(t, http.StatusCreated, w.Code)
	}
	w = serve(s, http.MethodGet, "/v1/entries?limit=1000&after=zz", "", nil)
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
	require.Less(t, len(page), 200)
	require.NotEmpty(t, w.Header().Get(HeaderNextPage))
	require.LessOrEqual(t, w.Body.Len(), 2*MaxPageBytes)
	all, err = h.List(context.Background())
	require.NoError(t, err)
	require.Len(t, all, n+200)
}

// A hostile or broken server cannot make the client loop or panic.
func TestHTTPClientHostileListing(t *testing.T) {
	for name, handler := range map[string]http.HandlerFunc{
		"same cursor": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(HeaderNextPage, "a")
			fmt.Fprint(w, `[{"name":"a","address":"YQ=="}]`)
		},
		"empty page with cursor": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(HeaderNextPage, "zzz"+r.URL.Query().Get("after"))
			fmt.Fprint(w, `[]`)
		},
		"bad escaping": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(HeaderNextPage, "%zz")
			fmt.Fprint(w, `[{"name":"a","address":"YQ=="}]`)
		},
		"not JSON": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `[{"name":`) },
		"huge": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "[")
			for i := 0; i < 200000; i++ {
				fmt.Fprintf(w, `{"name":"n%07d","address":"YQ=="},`, i)
			}
			fmt.Fprint(w, `{"name":"last","address":"YQ=="}]`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(handler)
			defer ts.Close()
			h, err := NewHTTP(ts.URL, "")
			require.NoError(t, err)
			defer h.Close()
			_, err = h.List(context.Background())
			require.Error(t, err)
			_, err = h.Instances(context.Background(), "svc")
			require.Error(t, err)
		})
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	require.NoError(t, os.WriteFile(p, []byte("  abc \n"), 0o600))
	tok, err := ReadTokenFile(p)
	require.NoError(t, err)
	require.Equal(t, "abc", tok)

	// Readable by group or others: refused, as ssh refuses a private key.
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o666} {
		require.NoError(t, os.Chmod(p, mode))
		_, err := ReadTokenFile(p)
		require.ErrorIs(t, err, ErrUnsafeToken, "%o", mode)
		require.ErrorContains(t, err, "too open")
		require.ErrorContains(t, err, "chmod 600 "+p)
	}
	require.NoError(t, os.Chmod(p, 0o600))
	require.NoError(t, os.WriteFile(p, []byte("\n"), 0o600))
	_, err = ReadTokenFile(p)
	require.ErrorContains(t, err, "empty")
	_, err = ReadTokenFile(dir)
	require.ErrorIs(t, err, ErrUnsafeToken)
	_, err = ReadTokenFile(filepath.Join(dir, "none"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// EnsureTokenFile creates a 0600 file in a 0700 directory once.
	q := filepath.Join(dir, "state", "ucxnet", "registry-token")
	tok1, created, err := EnsureTokenFile(q)
	require.NoError(t, err)
	require.True(t, created)
	require.Len(t, tok1, 64)
	fi, err := os.Stat(q)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Dir(q))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	tok2, created, err := EnsureTokenFile(q)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, tok1, tok2)
	require.NoError(t, os.Chmod(q, 0o644))
	_, _, err = EnsureTokenFile(q)
	require.ErrorIs(t, err, ErrUnsafeToken)
}

// The HTTP backend finds the token as the server stores it: the default
// token file, for a registry on this host only; the environment first.
func TestHTTPClientFindsToken(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(EnvRegistryToken, "")
	t.Setenv(EnvRegistryTokenFile, "")
	def, err := DefaultTokenFile()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(home, ".local", "state", "ucxnet", "registry-token"), def)
	tok, _, err := EnsureTokenFile(def)
	require.NoError(t, err)

	f := newHTTPFixture(t, ServerConfig{Token: tok})
	r, err := Open(f.url)
	require.NoError(t, err)
	defer r.(*HTTP).Close()
	require.NoError(t, r.Register(context.Background(), testEntry("found", "")))

	// Not sent to a registry elsewhere.
	got, from, err := clientToken("192.0.2.1:7070")
	require.NoError(t, err)
	require.Empty(t, got)
	require.Empty(t, from)
	got, from, err = clientToken("[::1]:7070")
	require.NoError(t, err)
	require.Equal(t, tok, got)
	require.Equal(t, def, from)

	// The environment wins; a token file open to others is an error.
	t.Setenv(EnvRegistryToken, "from-env")
	got, from, err = clientToken("127.0.0.1:1")
	require.NoError(t, err)
	require.Equal(t, "from-env", got)
	require.Empty(t, from)
	t.Setenv(EnvRegistryToken, "")
	loose := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(loose, []byte("x"), 0o644))
	t.Setenv(EnvRegistryTokenFile, loose)
	_, err = Open("http://192.0.2.1:7070")
	require.ErrorIs(t, err, ErrUnsafeToken)
	require.ErrorContains(t, err, EnvRegistryTokenFile)
	t.Setenv(EnvRegistryTokenFile, "")
	require.NoError(t, os.Chmod(def, 0o644))
	_, err = Open(f.url)
	require.ErrorIs(t, err, ErrUnsafeToken)
}

// An https registry is verified: trusted with the CA file, refused
// without it.
func TestHTTPTLS(t *testing.T) {
	srv := NewServer(ServerConfig{Token: "tls-token"})
	defer srv.Close()
	ts := httptest.NewTLSServer(srv)
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644))

	t.Setenv(EnvRegistryToken, "tls-token")
	t.Setenv(EnvRegistryCA, "")
	r, err := Open(ts.URL)
	require.NoError(t, err)
	err = r.Register(context.Background(), testEntry("tls", ""))
	require.ErrorContains(t, err, "certificate")
	r.(*HTTP).Close()

	t.Setenv(EnvRegistryCA, ca)
	r, err = Open(ts.URL)
	require.NoError(t, err)
	require.NoError(t, r.Register(context.Background(), testEntry("tls", "")))
	e, err := r.Resolve(context.Background(), "tls")
	require.NoError(t, err)
	require.Equal(t, "tls", e.Name)
	require.NoError(t, r.(*HTTP).Close())

	t.Setenv(EnvRegistryCA, filepath.Join(t.TempDir(), "missing.pem"))
	_, err = Open(ts.URL)
	require.ErrorContains(t, err, "CA file")
	empty := filepath.Join(t.TempDir(), "empty.pem")
	require.NoError(t, os.WriteFile(empty, []byte("not pem"), 0o644))
	t.Setenv(EnvRegistryCA, empty)
	_, err = Open(ts.URL)
	require.ErrorContains(t, err, "no PEM certificate")
}

// Close of the HTTP backend stops its refreshers and drops its
// connections: no goroutine outlives it.
func TestHTTPCloseNoLeak(t *testing.T) {
	f := newHTTPFixture(t, ServerConfig{})
	ignore := goleak.IgnoreCurrent()
	h, err := NewHTTP(f.url, "", WithLeaseTTL(300*time.Millisecond))
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		require.NoError(t, h.Register(ctx, testEntry(fmt.Sprintf("leak-%d", i), "svc")))
	}
	_, err = h.Instances(ctx, "svc")
	require.NoError(t, err)
	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "Close is idempotent")
	// Server-side conn goroutines end once the client has closed its
	// connections; goleak retries until they have.
	goleak.VerifyNone(t, ignore)
	require.Zero(t, f.srv.Load().Len(), "Close deletes the entries")

	for _, c := range []interface{ Close() error }{&Dir{}, NewMemory()} {
		require.NoError(t, c.Close())
	}
}
