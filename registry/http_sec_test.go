package registry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// headerRecorder is a second server, the redirect's target: it records
// the Authorization header of every request it gets and answers as a
// registry holding every name would.
type headerRecorder struct {
	ts   *httptest.Server
	mu   sync.Mutex
	auth []string
}

func newHeaderRecorder(t *testing.T) *headerRecorder {
	t.Helper()
	hr := &headerRecorder{}
	hr.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hr.mu.Lock()
		hr.auth = append(hr.auth, r.Header.Get("Authorization"))
		hr.mu.Unlock()
		name := strings.TrimPrefix(r.URL.Path, "/v1/entries/")
		writeJSON(w, http.StatusOK, testEntry(name, "planted"))
	}))
	t.Cleanup(hr.ts.Close)
	return hr
}

func (hr *headerRecorder) seen() []string {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	return append([]string(nil), hr.auth...)
}

// TestAttackRedirectStealsToken: the registry URL answers with a redirect
// to another server on the same host (another port: Go's client keeps the
// Authorization header for the same host name, whatever the port). The
// client must not follow it: the second server gets no request, let
// alone the token, and no entry of its is believed.
func TestAttackRedirectStealsToken(t *testing.T) {
	ctx := context.Background()
	hr := newHeaderRecorder(t)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, hr.ts.URL+r.URL.RequestURI(), code)
		}))
		t.Cleanup(redir.Close)
		for _, opts := range [][]HTTPOption{nil, {WithHTTPClient(&http.Client{})}} {
			h, err := NewHTTP(redir.URL, "s3cret", opts...)
			require.NoError(t, err)
			_, err = h.Resolve(ctx, "svc")
			require.ErrorContains(t, err, "redirect", "status %d", code)
			require.ErrorIs(t, err, ErrUnavailable)
			require.ErrorContains(t, h.Register(ctx, testEntry("mine", "")), "redirect")
			_, err = h.List(ctx)
			require.ErrorContains(t, err, "redirect")
			require.NoError(t, h.Close())
		}
	}
	require.Empty(t, hr.seen(), "the redirect's target got requests (Authorization headers: %q)", hr.seen())
}

// TestHealthzNoCount: /healthz without the token says the server is up
// and nothing about its contents; with the token it also counts entries.
func TestHealthzNoCount(t *testing.T) {
	ctx := context.Background()
	f := newHTTPFixture(t, ServerConfig{Token: "s3cret"})
	h := newHTTPClient(t, f, "s3cret")
	require.NoError(t, h.Register(ctx, testEntry("a", "")))
	require.NoError(t, h.Register(ctx, testEntry("b", "")))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		for _, tok := range []string{"", "wrong"} {
			code, body := rawRequest(t, f.url, method, "/healthz", tok, "")
			require.Equal(t, http.StatusOK, code)
			if method == http.MethodGet {
				require.JSONEq(t, `{"status":"ok"}`, body, "token %q", tok)
			}
		}
	}
	code, body := rawRequest(t, f.url, http.MethodGet, "/healthz", "s3cret", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok","entries":2}`, body)

	// Without a token configured there is nobody to tell apart: no count.
	open := newHTTPFixture(t, ServerConfig{})
	code, body = rawRequest(t, open.url, http.MethodGet, "/healthz", "", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)
}
