package registry

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// EnvRegistryToken names the environment variable holding the bearer token
// that [Open] gives to the [HTTP] backend (and that "ucxnet registry"
// requires when set).
const EnvRegistryToken = "UCXNET_REGISTRY_TOKEN"

// EnvRegistryTTL names the environment variable holding the lease TTL, a Go
// duration such as "500ms" or "10s", that [Open] gives to the [HTTP]
// backend. Unset, the TTL is [DefaultLeaseTTL]. A short TTL makes the
// entries of a crashed process vanish sooner at the price of more refresh
// requests (one every TTL/3 per listener).
const EnvRegistryTTL = "UCXNET_REGISTRY_TTL"

// ErrUnavailable reports that the registry server could not be reached or
// answered with a server error.
var ErrUnavailable = errors.New("registry: server unavailable")

// HTTP is a [Registry] kept by a registry server (a [Server], e.g. run by
// "ucxnet registry"), reached over HTTP(S): the backend for listeners and
// dialers on many hosts. Open("http://host:port") returns one.
//
// Register leases the name for the TTL (default [DefaultLeaseTTL]) and
// starts one goroutine per registration that refreshes the lease every
// TTL/3; if the server has lost the lease (it restarted, or the process
// was stalled past the TTL), the goroutine registers the entry again.
// Unregister stops that goroutine and deletes the entry; a process that
// dies without it loses its entries once the TTL runs out. Close stops
// every refresher, deleting their entries. Nothing else closes an HTTP:
// a [github.com/ucxnet/ucxnet/ucxnet.Transport] using it does not, but
// its listeners unregister on Close, which stops their refreshers.
//
// Liveness is the lease: Entry.PID and Entry.Host are not checked.
type HTTP struct {
	base    string // without a trailing slash
	token   string
	client  *http.Client
	ownHTTP *http.Transport // closed by Close; nil with WithHTTPClient
	ttl     time.Duration
	timeout time.Duration
	optErr  error // from an option, returned by NewHTTP

	mu     sync.Mutex
	regs   map[string]*httpLease
	closed bool
}

// HTTPOption configures [NewHTTP].
type HTTPOption func(*HTTP)

// WithLeaseTTL sets the lease TTL asked for by Register (default
// [DefaultLeaseTTL]); the server bounds it (by default to 100 ms .. 10 min).
func WithLeaseTTL(ttl time.Duration) HTTPOption {
	return func(h *HTTP) {
		if ttl > 0 {
			h.ttl = ttl
		}
	}
}

// WithHTTPClient makes the backend send its requests with a copy of c
// instead of a private client; the copy never follows redirects (see
// NewHTTP). Close then leaves c's idle connections alone.
func WithHTTPClient(c *http.Client) HTTPOption {
	return func(h *HTTP) {
		if c != nil {
			cc := *c
			cc.CheckRedirect = noRedirect
			h.client = &cc
			h.ownHTTP = nil
		}
	}
}

// WithTLSConfig makes the backend use c (cloned) for "https://"
// registries, e.g. to trust a private CA. It has no effect together with
// [WithHTTPClient].
func WithTLSConfig(c *tls.Config) HTTPOption {
	return func(h *HTTP) {
		if c != nil && h.ownHTTP != nil {
			h.ownHTTP.TLSClientConfig = c.Clone()
		}
	}
}

// WithCAFile is [WithTLSConfig] trusting only the PEM certificates in
// file; NewHTTP fails if file cannot be read or holds none.
func WithCAFile(file string) HTTPOption {
	return func(h *HTTP) {
		pool, err := loadCAFile(file)
		if err != nil {
			h.optErr = errors.Join(h.optErr, err)
			return
		}
		WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})(h)
	}
}

func loadCAFile(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("registry: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("registry: CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// withOwnerCheck makes the backend's own transport connect only to a
// server whose socket belongs to this user (see ownerCheckedDial), and
// never through a proxy: for the default token, read from tokenFile.
func withOwnerCheck(tokenFile string) HTTPOption {
	return func(h *HTTP) {
		if h.ownHTTP == nil {
			h.optErr = errors.Join(h.optErr, fmt.Errorf("registry: the default token needs the backend's own HTTP client"))
			return
		}
		h.ownHTTP.Proxy = nil
		h.ownHTTP.DialContext = ownerCheckedDial(h.ownHTTP.DialContext, tokenFile)
	}
}

// WithRequestTimeout bounds each request (default 5 s); the caller's
// context may end it sooner.
func WithRequestTimeout(d time.Duration) HTTPOption {
	return func(h *HTTP) {
		if d > 0 {
			h.timeout = d
		}
	}
}

// NewHTTP returns the backend for the registry server at baseURL, an
// "http://" or "https://" URL, possibly with a path prefix. A non-empty
// token is sent as "Authorization: Bearer TOKEN". Redirects are not
// followed (a 3xx answer is an error naming the redirect): Go's client
// would send the token along to a redirect on the same host name, whatever
// its port. It does not contact the server.
func NewHTTP(baseURL, token string, opts ...HTTPOption) (*HTTP, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("registry: bad URL %q: %w", baseURL, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("registry: bad URL %q: want http://host:port or https://host:port", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("registry: bad URL %q: no user info, query or fragment allowed (pass the token in %s)", baseURL, EnvRegistryToken)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	h := &HTTP{
		base:    strings.TrimRight(u.String(), "/"),
		token:   token,
		client:  &http.Client{Transport: tr, CheckRedirect: noRedirect},
		ownHTTP: tr,
		ttl:     DefaultLeaseTTL,
		timeout: 5 * time.Second,
		regs:    map[string]*httpLease{},
	}
	for _, o := range opts {
		o(h)
	}
	if h.optErr != nil {
		return nil, h.optErr
	}
	return h, nil
}

// errRedirect is what noRedirect returns.
var errRedirect = errors.New("the registry answered with a redirect, which is not followed (the token would go to another server); use the final URL")

// noRedirect is the CheckRedirect of the backend's own client: a registry
// never redirects, and following one would send the bearer token (and
// trust the answers of) whatever server the redirect names.
func noRedirect(req *http.Request, via []*http.Request) error { return errRedirect }

// openHTTP is Open for "http://" and "https://" specs: the token comes from
// $UCXNET_REGISTRY_TOKEN, $UCXNET_REGISTRY_TOKEN_FILE or, for a registry on
// a loopback address, [DefaultTokenFile] (see clientToken); the TTL from
// $UCXNET_REGISTRY_TTL; CA certificates from $UCXNET_REGISTRY_CA.
func openHTTP(spec string) (Registry, error) {
	var opts []HTTPOption
	if v := strings.TrimSpace(os.Getenv(EnvRegistryTTL)); v != "" {
		ttl, err := time.ParseDuration(v)
		if err != nil || ttl <= 0 {
			return nil, fmt.Errorf("registry: %s=%q: want a positive duration such as 10s or 500ms", EnvRegistryTTL, v)
		}
		opts = append(opts, WithLeaseTTL(ttl))
	}
	if ca := os.Getenv(EnvRegistryCA); ca != "" {
		opts = append(opts, WithCAFile(ca))
	}
	u, err := url.Parse(strings.TrimSpace(spec))
	if err != nil {
		return nil, fmt.Errorf("registry: bad URL %q: %w", spec, err)
	}
	tok, fromFile, err := clientToken(u.Host)
	if err != nil {
		return nil, err
	}
	if fromFile != "" {
		opts = append(opts, withOwnerCheck(fromFile))
	}
	return NewHTTP(spec, tok, opts...)
}

// String returns the base URL.
func (h *HTTP) String() string { return h.base }

// TTL returns the lease TTL Register asks for.
func (h *HTTP) TTL() time.Duration { return h.ttl }

// httpStatusError is a non-2xx answer.
type httpStatusError struct {
	code int
	msg  string
}

// Error returns the HTTP status and the server's message.
func (e *httpStatusError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("%d %s", e.code, http.StatusText(e.code))
	}
	return fmt.Sprintf("%d %s: %s", e.code, http.StatusText(e.code), e.msg)
}

func statusOf(err error) int {
	var se *httpStatusError
	if errors.As(err, &se) {
		return se.code
	}
	return 0
}

// do sends one request and decodes a 2xx JSON answer into out (if not
// nil). Errors name the registry, the method and the path; a status
// error is an *httpStatusError, wrapped, with 5xx also wrapping
// ErrUnavailable.
func (h *HTTP) do(ctx context.Context, method, path string, in, out any) error {
	_, err := h.doResp(ctx, method, path, in, out)
	return err
}

// doResp is do that also returns the answer's header (nil on error).
func (h *HTTP) doResp(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("registry %s: %s %s: %w", h.base, method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %s %s: %w", h.base, method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("registry %s: %s %s: %w", h.base, method, path, cerr)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, ErrForeignRegistry) {
			return nil, fmt.Errorf("registry %s: %s %s: %w", h.base, method, path, err)
		}
		// The cause is kept as text only: a refused TCP connection to the
		// registry must not look like ECONNREFUSED from a ucxnet listener.
		return nil, fmt.Errorf("registry %s: %s %s: %w: %v", h.base, method, path, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("registry %s: %s %s: %w: reading the answer: %v", h.base, method, path, ErrUnavailable, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &httpStatusError{code: resp.StatusCode}
		var er errorResponse
		if json.Unmarshal(b, &er) == nil && er.Error != "" {
			se.msg = er.Error
		} else {
			se.msg = strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		if resp.StatusCode >= 500 {
			return nil, fmt.Errorf("registry %s: %s %s: %w: %w", h.base, method, path, ErrUnavailable, se)
		}
		return nil, fmt.Errorf("registry %s: %s %s: %w", h.base, method, path, se)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("registry %s: %s %s: bad answer: %w", h.base, method, path, err)
		}
	}
	return resp.Header, nil
}

func entryPath(name string) string {
	// PathEscape leaves "." alone, and a path segment "." or ".." would be
	// cleaned away by proxies and muxes: escape those dots too.
	switch name {
	case ".":
		return "/v1/entries/%2E"
	case "..":
		return "/v1/entries/%2E%2E"
	}
	return "/v1/entries/" + url.PathEscape(name)
}

// Resolve asks the server for the entry named name. A name that is absent
// or expired gives an error wrapping ErrNotFound.
func (h *HTTP) Resolve(ctx context.Context, name string) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	if err := ValidName(name); err != nil {
		return Entry{}, fmt.Errorf("%w: %w (%s)", ErrNotFound, err, h.base)
	}
	var e Entry
	err := h.do(ctx, http.MethodGet, entryPath(name), nil, &e)
	if err != nil {
		if statusOf(err) == http.StatusNotFound {
			return Entry{}, fmt.Errorf("%w: %q (%s)", ErrNotFound, name, h.base)
		}
		return Entry{}, err
	}
	if e.Name != name {
		return Entry{}, fmt.Errorf("registry %s: GET %s: answer is for %q", h.base, entryPath(name), e.Name)
	}
	return e, nil
}

// Instances lists the live entries of service, sorted by name; none gives
// an empty slice and a nil error, as the [Registry] contract says. It
// follows the server's pages (see [Server]).
func (h *HTTP) Instances(ctx context.Context, service string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := h.list(ctx, "/v1/services/"+url.PathEscape(service))
	if statusOf(err) == http.StatusNotFound {
		return []Entry{}, nil
	}
	return out, err
}

// maxListed bounds the entries one listing may gather over all its pages.
const maxListed = DefaultMaxEntries

// list GETs path page by page, following the cursor in [HeaderNextPage]
// until a page comes without one. A cursor that does not move forward,
// or more than maxListed entries, is an error, so a broken server cannot
// keep it looping.
func (h *HTTP) list(ctx context.Context, path string) ([]Entry, error) {
	out := []Entry{}
	after := ""
	for {
		p := path + "?limit=" + fmt.Sprint(MaxPageLimit)
		if after != "" {
			p += "&after=" + url.QueryEscape(after)
		}
		var page []Entry
		hdr, err := h.doResp(ctx, http.MethodGet, p, nil, &page)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(out) > maxListed {
			return nil, fmt.Errorf("registry %s: GET %s: more than %d entries", h.base, path, maxListed)
		}
		next := hdr.Get(HeaderNextPage)
		if next == "" {
			return out, nil
		}
		cur, err := url.QueryUnescape(next)
		if err != nil || cur <= after || len(page) == 0 {
			return nil, fmt.Errorf("registry %s: GET %s: bad page cursor %q after %q", h.base, path, next, after)
		}
		after = cur
	}
}

// List returns every live entry, sorted by name, following the server's
// pages.
func (h *HTTP) List(ctx context.Context) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return h.list(ctx, "/v1/entries")
}

// Close stops every refresher and deletes its entry (best effort, for up
// to a few seconds), then drops idle connections. Register fails
// afterwards. It is idempotent.
func (h *HTTP) Close() error {
	h.mu.Lock()
	h.closed = true
	regs := h.regs
	h.regs = map[string]*httpLease{}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for name, l := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.halt()
			l.mu.Lock()
			lease := l.lease
			l.mu.Unlock()
			_ = h.deleteLease(ctx, name, lease)
		}()
	}
	wg.Wait()
	if h.ownHTTP != nil {
		h.ownHTTP.CloseIdleConnections()
	}
	return nil
}

var _ Registry = (*HTTP)(nil)
