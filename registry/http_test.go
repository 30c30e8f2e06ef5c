package registry

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// httpFixture is a Server behind an httptest.Server; every test closes all
// of it (the package's TestMain checks for leaked goroutines).
type httpFixture struct {
	srv atomic.Pointer[Server] // swapped to simulate a restart
	ts  *httptest.Server
	url string
}

func newHTTPFixture(t *testing.T, cfg ServerConfig) *httpFixture {
	t.Helper()
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 50 * time.Millisecond
	}
	f := &httpFixture{}
	srv := NewServer(cfg)
	f.srv.Store(srv)
	f.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.srv.Load().ServeHTTP(w, r)
	}))
	f.url = f.ts.URL
	t.Cleanup(func() {
		f.ts.Close()
		f.srv.Load().Close()
	})
	return f
}

// restart replaces the server by an empty one.
func (f *httpFixture) restart(cfg ServerConfig) {
	old := f.srv.Swap(NewServer(cfg))
	old.Close()
}

// newHTTPClient returns a client of f closed by the test's cleanup.
func newHTTPClient(t *testing.T, f *httpFixture, token string, opts ...HTTPOption) *HTTP {
	t.Helper()
	h, err := NewHTTP(f.url, token, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}

// TestHTTPContract runs the shared Registry contract against the HTTP
// backend and a Server.
func TestHTTPContract(t *testing.T) {
	saved := backends
	t.Cleanup(func() { backends = saved })
	backends = []struct {
		name string
		open func(t *testing.T) Registry
	}{
		{"http", func(t *testing.T) Registry {
			return newHTTPClient(t, newHTTPFixture(t, ServerConfig{}), "")
		}},
	}
	TestContract(t)
}

func TestHTTPOwnership(t *testing.T) {
	ctx := context.Background()
	f := newHTTPFixture(t, ServerConfig{})
	a := newHTTPClient(t, f, "")
	b := newHTTPClient(t, f, "")

	require.NoError(t, a.Register(ctx, testEntry("x", "svc")))
	err := b.Register(ctx, testEntry("x", "svc"))
	require.ErrorIs(t, err, ErrNameInUse)
	require.True(t, errors.Is(err, syscall.EADDRINUSE))
	require.Contains(t, err.Error(), `"x"`)
	require.Contains(t, err.Error(), "409")

	// b does not own x: its Unregister is a no-op, raw deletes and
	// refreshes with a wrong lease are refused.
	require.NoError(t, b.Unregister(ctx, "x"))
	for _, req := range []struct{ method, path string }{
		{http.MethodDelete, "/v1/entries/x?lease=bogus"},
		{http.MethodPost, "/v1/entries/x/refresh?lease=bogus"},
		{http.MethodPut, "/v1/entries/x?lease=bogus"},
	} {
		code, _ := rawRequest(t, f.url, req.method, req.path, "", `{"address":"YQ=="}`)
		require.Equal(t, http.StatusConflict, code, "%s %s", req.method, req.path)
	}
	got, err := b.Resolve(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, testEntry("x", "svc"), got)
	insts, err := b.Instances(ctx, "svc")
	require.NoError(t, err)
	require.Equal(t, []Entry{testEntry("x", "svc")}, insts)

	// The lease id is never shown.
	_, body := rawRequest(t, f.url, http.MethodGet, "/v1/entries/x", "", "")
	require.NotContains(t, body, "lease")

	require.NoError(t, a.Unregister(ctx, "x"))
	require.NoError(t, b.Register(ctx, testEntry("x", "svc")))
	_, err = a.Resolve(ctx, "x")
	require.NoError(t, err)
	_, body = rawRequest(t, f.url, http.MethodGet, "/v1/entries", "", "")
	require.Contains(t, body, `"name":"x"`)
}

// A publisher that stops refreshing without deleting (a crash) loses its
// entry once the TTL has run out; one that refreshes keeps it.
func TestHTTPLeaseExpiry(t *testing.T) {
	ctx := context.Background()
	f := newHTTPFixture(t, ServerConfig{})
	const ttl = 300 * time.Millisecond
	h := newHTTPClient(t, f, "", WithLeaseTTL(ttl))
	other := newHTTPClient(t, f, "")
	require.Equal(t, ttl, h.TTL())

	start := time.Now()
	require.NoError(t, h.Register(ctx, testEntry("crashy", "s")))
	require.NoError(t, h.Register(ctx, testEntry("steady", "s")))
	require.True(t, h.stopRefreshing("crashy"))
	_, err := other.Resolve(ctx, "crashy")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := other.Resolve(ctx, "crashy")
		return errors.Is(err, ErrNotFound)
	}, 30*time.Second, 20*time.Millisecond, "the unrefreshed entry outlived its lease")
	gone := time.Since(start)
	require.GreaterOrEqual(t, gone, ttl-20*time.Millisecond)
	t.Logf("entry gone %v after it was registered and left unrefreshed (TTL %v)", gone, ttl)

	// The refreshed entry outlives several TTLs.
	time.Sleep(4*ttl - time.Since(start))
	got, err := other.Resolve(ctx, "steady")
	require.NoError(t, err)
	require.Equal(t, testEntry("steady", "s"), got)
	insts, err := other.Instances(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, []Entry{testEntry("steady", "s")}, insts)
	// And the sweeper has dropped the expired one.
	require.Equal(t, 1, f.srv.Load().Len())

	// Unregister stops the refresher and deletes at once.
	require.NoError(t, h.Unregister(ctx, "steady"))
	_, err = other.Resolve(ctx, "steady")
	require.ErrorIs(t, err, ErrNotFound)
	require.False(t, h.stopRefreshing("steady"))
}

// After a server restart (an empty registry) the refresher registers its
// entry again within about TTL/3.
func TestHTTPServerRestart(t *testing.T) {
	ctx := context.Background()
	f := newHTTPFixture(t, ServerConfig{})
	h := newHTTPClient(t, f, "", WithLeaseTTL(300*time.Millisecond))
	require.NoError(t, h.Register(ctx, testEntry("phoenix", "")))
	f.restart(ServerConfig{SweepInterval: 50 * time.Millisecond})
	_, err := h.Resolve(ctx, "phoenix")
	require.ErrorIs(t, err, ErrNotFound)
	require.Eventually(t, func() bool {
		_, err := h.Resolve(ctx, "phoenix")
		return err == nil
	}, 3*time.Second, 20*time.Millisecond)
	got, err := h.Resolve(ctx, "phoenix")
	require.NoError(t, err)
	require.Equal(t, testEntry("phoenix", ""), got)

	// The new lease is ours: Unregister deletes the entry.
	require.NoError(t, h.Unregister(ctx, "phoenix"))
	_, err = h.Resolve(ctx, "phoenix")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestHTTPToken(t *testing.T) {
	ctx := context.Background()
	f := newHTTPFixture(t, ServerConfig{Token: "s3cret"})
	for _, tok := range []string{"", "wrong", "s3cret-and-more"} {
		h := newHTTPClient(t, f, tok)
		err := h.Register(ctx, testEntry("t", ""))
		require.Error(t, err)
		require.Contains(t, err.Error(), "401")
		require.NotErrorIs(t, err, ErrNameInUse)
		_, err = h.Resolve(ctx, "t")
		require.Contains(t, err.Error(), "401")
		require.NotErrorIs(t, err, ErrNotFound)
	}
	h := newHTTPClient(t, f, "s3cret")
	require.NoError(t, h.Register(ctx, testEntry("t", "")))
	_, err := h.Resolve(ctx, "t")
	require.NoError(t, err)

	code, _ := rawRequest(t, f.url, http.MethodGet, "/v1/entries/t", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = rawRequest(t, f.url, http.MethodGet, "/v1/entries/t", "s3cret", "")
	require.Equal(t, http.StatusOK, code)
	code, body := rawRequest(t, f.url, http.MethodGet, "/healthz", "", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)
}

// Open builds the HTTP backend from the spec and the environment; network
// failures are clear and do not look like a refused ucxnet dial.
func TestHTTPOpen(t *testing.T) {
	t.Setenv(EnvRegistryToken, "tok")
	t.Setenv(EnvRegistryTTL, "500ms")
	for _, spec := range []string{"http://127.0.0.1:7070", "HTTP://127.0.0.1:7070/", "https://reg.example:443/prefix"} {
		r, err := Open(spec)
		require.NoError(t, err, spec)
		h, ok := r.(*HTTP)
		require.True(t, ok, spec)
		require.Equal(t, 500*time.Millisecond, h.TTL())
		require.Equal(t, "tok", h.token)
		require.Equal(t, strings.TrimRight(strings.Replace(spec, "HTTP", "http", 1), "/"), h.String())
		h.Close()
	}
	for _, spec := range []string{"http://", "http:", "http", "https://user:pw@h:1", "http://h:1/?q=1"} {
		_, err := Open(spec)
		require.Error(t, err, spec)
	}
	t.Setenv(EnvRegistryTTL, "soon")
	_, err := Open("http://127.0.0.1:7070")
	require.ErrorContains(t, err, EnvRegistryTTL)
	require.Panics(t, func() { RegisterScheme("http", func(string) (Registry, error) { return nil, nil }) })

	// A registry that is not there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ln.Close()
	h, err := NewHTTP(base, "")
	require.NoError(t, err)
	defer h.Close()
	_, err = h.Resolve(context.Background(), "x")
	require.ErrorIs(t, err, ErrUnavailable)
	require.NotErrorIs(t, err, ErrNotFound)
	require.NotErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorContains(t, err, "registry "+base+": GET /v1/entries/x: ")
	require.ErrorContains(t, err, "connection refused")
	err = h.Register(context.Background(), testEntry("x", ""))
	require.ErrorIs(t, err, ErrUnavailable)
}

// rawRequest sends one request to the server at base.
func rawRequest(t *testing.T, base, method, path, token, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// serve runs one request through s directly, with the raw (escaped) path
// taken as is.
func serve(s *Server, method, rawPath, body string, hdr map[string]string) *httptest.ResponseRecorder {
	u := &url.URL{Path: rawPath}
	if p, q, ok := strings.Cut(rawPath, "?"); ok {
		u.Path, u.RawQuery = p, q
	}
	if unesc, err := url.PathUnescape(u.Path); err == nil {
		u.RawPath, u.Path = u.Path, unesc
	}
	r := &http.Request{
		Method: method, URL: u, Header: http.Header{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Host: "x",
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// checkAnswer requires a well-formed answer: no 5xx but a full registry,
// JSON errors.
func checkAnswer(t testing.TB, w *httptest.ResponseRecorder, what string) {
	t.Helper()
	if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s: status %d: %s", what, w.Code, w.Body)
	}
	if w.Code >= 400 {
		var er errorResponse
		if err := json.Unmarshal(w.Body.Bytes(), &er); err != nil || er.Error == "" {
			t.Fatalf("%s: status %d with a body that is no JSON error: %q", what, w.Code, w.Body)
		}
	}
}

func TestHTTPBadRequests(t *testing.T) {
	s := NewServer(ServerConfig{})
	defer s.Close()
	okBody := `{"address":"YWRkcg==","pid":1,"ttl_ms":1000}`
	big := `{"address":"` + strings.Repeat("A", MaxRequestBody) + `"}`
	for _, tc := range []struct {
		method, path, body string
		code               int
		says               string
	}{
		{"GET", "/", "", 404, "no such resource"},
		{"GET", "/v2/entries/x", "", 404, "no such resource"},
		{"GET", "/v1/entries/x", "", 404, "not found"},
		{"GET", "/v1/entries/", "", 200, ""},
		{"GET", "/v1/entries/a%00b", "", 400, "invalid name"},
		{"GET", "/v1/entries/" + strings.Repeat("x", 256), "", 400, "exceeds"},
		{"GET", "/v1/entries/x/other", "", 404, "no such resource"},
		{"PATCH", "/v1/entries/x", "", 405, "not allowed"},
		{"GET", "/v1/entries/x/refresh", "", 405, "not allowed"},
		{"POST", "/healthz", "", 405, "not allowed"},
		{"PUT", "/v1/entries/x", "", 400, "empty body"},
		{"PUT", "/v1/entries/x", "{", 400, "bad JSON"},
		{"PUT", "/v1/entries/x", "[1,2]", 400, "bad JSON"},
		{"PUT", "/v1/entries/x", `{"address":"YQ=="} {}`, 400, "trailing data"},
		{"PUT", "/v1/entries/x", `{"address":"not base64!"}`, 400, "bad JSON"},
		{"PUT", "/v1/entries/x", `{"address":""}`, 400, "empty address"},
		{"PUT", "/v1/entries/x", `{"address":"YQ==","pid":-1}`, 400, "negative pid"},
		{"PUT", "/v1/entries/x", `{"name":"y","address":"YQ=="}`, 400, "differs"},
		{"PUT", "/v1/entries/x", `{"address":"YQ==","ttl_ms":1}`, 400, "out of range"},
		{"PUT", "/v1/entries/x", `{"address":"YQ==","ttl_ms":-5}`, 400, "out of range"},
		{"PUT", "/v1/entries/x", `{"address":"YQ==","ttl_ms":9223372036854775807}`, 400, "out of range"},
		{"PUT", "/v1/entries/x", `{"address":"YQ==","ttl_ms":1e400}`, 400, "bad JSON"},
		{"PUT", "/v1/entries/x", big, 413, "exceeds"},
		{"POST", "/v1/entries/x/refresh", "", 400, "lease id missing"},
		{"POST", "/v1/entries/x/refresh", "{", 400, "bad JSON"},
		{"POST", "/v1/entries/x/refresh?lease=l", "", 404, "not found"},
		{"DELETE", "/v1/entries/x", "", 400, "lease id missing"},
		{"DELETE", "/v1/entries/x?lease=l", "", 404, "not found"},
		{"PUT", "/v1/services/x", "", 405, "not allowed"},
		{"PUT", "/v1/entries/ok", okBody, 201, ""},
		{"PUT", "/v1/entries/ok", okBody, 409, "already in use"},
		{"GET", "/v1/entries/ok", "", 200, ""},
	} {
		w := serve(s, tc.method, tc.path, tc.body, nil)
		what := tc.method + " " + tc.path + " " + tc.body[:min(len(tc.body), 60)]
		require.Equal(t, tc.code, w.Code, "%s: %s", what, w.Body)
		require.Contains(t, w.Body.String(), tc.says, what)
		checkAnswer(t, w, what)
	}

	// Garbage: random methods, paths, bodies and headers.
	rng := rand.New(rand.NewPCG(1, 2))
	methods := []string{"GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "", "G\x00T"}
	pieces := []string{"/", "v1", "entries", "services", "refresh", "healthz", "%", "%2F", "%2E", "..", ".", "?lease=", "x", "\x00", "é", "%ff", "//", "?", "&", "#"}
	bodies := []string{"", "{", "}", "null", "[]", `{"address":null}`, `{"address":"YQ==","ttl_ms":"x"}`, `{"name":1}`, `{"meta":{"a":1}}`, "\xff\xfe", `{"lease":5}`, `{"address":"YQ==","ttl_ms":500}`}
	for i := range 3000 {
		var p strings.Builder
		for range rng.IntN(8) {
			p.WriteString(pieces[rng.IntN(len(pieces))])
		}
		body := bodies[rng.IntN(len(bodies))]
		if rng.IntN(4) == 0 {
			b := make([]byte, rng.IntN(64))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
			body = string(b)
		}
		m := methods[rng.IntN(len(methods))]
		w := serve(s, m, p.String(), body, map[string]string{"Authorization": "Bearer x"})
		checkAnswer(t, w, strings.Join([]string{"garbage", m, p.String(), body}, " "))
		_ = i
	}
}

// FuzzHTTPServer feeds arbitrary requests to a Server: it never panics,
// answers 5xx only when full, and every error is JSON.
func FuzzHTTPServer(f *testing.F) {
	f.Add("PUT", "/v1/entries/x", `{"address":"YQ=="}`)
	f.Add("POST", "/v1/entries/x/refresh?lease=1", "")
	f.Add("DELETE", "/v1/entries/%2E%2E?lease=a", "")
	f.Add("GET", "/v1/services/", "")
	f.Add("GET", "/healthz", "")
	s := NewServer(ServerConfig{Token: "t", MaxEntries: 64})
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, method, path, body string) {
		w := serve(s, method, path, body, map[string]string{"Authorization": "Bearer t"})
		checkAnswer(t, w, method+" "+path)
	})
}
