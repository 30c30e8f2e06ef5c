package registry

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Defaults of [ServerConfig] and of the [HTTP] client.
const (
	// DefaultLeaseTTL is the lease TTL used when a client asks for none.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultMinLeaseTTL and DefaultMaxLeaseTTL bound the TTL a client may
	// ask for.
	DefaultMinLeaseTTL = 100 * time.Millisecond
	DefaultMaxLeaseTTL = 10 * time.Minute
	// HardMaxLeaseTTL caps ServerConfig.MaxTTL: no lease outlives its last
	// refresh by more than an hour, whatever the configuration.
	HardMaxLeaseTTL = time.Hour
	// DefaultMaxEntries bounds the number of live entries a Server holds.
	DefaultMaxEntries = 100000
	// DefaultMaxBytes bounds the memory the entries of a Server take, as
	// ServerConfig.MaxBytes counts it: 64 MiB.
	DefaultMaxBytes = 64 << 20
	// MaxRequestBody is the largest request body a Server reads: room for
	// the largest valid entry (MaxAddressLen in base64, MaxMetaBytes of
	// meta, JSON escaping).
	MaxRequestBody = 48 << 10
	// DefaultPageLimit and MaxPageLimit are the default and largest number
	// of entries in one page of a listing (?limit=N).
	DefaultPageLimit = 500
	MaxPageLimit     = 1000
	// MaxPageBytes bounds the entries of one listing page, counted as
	// ServerConfig.MaxBytes counts them: a page ends early, after at least one entry, rather than
	// exceed it.
	MaxPageBytes = 1 << 20
)

// HeaderNextPage is the header of a listing page that is not the last: its
// value is the query-escaped cursor to pass as ?after= for the next page.
const HeaderNextPage = "X-Ucxnet-Next-After"

// entryCost estimates the bytes an entry takes in a Server (and, within a
// factor of about 4/3, in JSON): its strings and address plus a fixed
// overhead for the map slot, the lease and the structures.
func entryCost(e Entry) int64 {
	n := 256 + len(e.Name)*2 + len(e.Service) + len(e.Host) + len(e.Address)*4/3 + metaBytes(e.Meta) + 48*len(e.Meta)
	return int64(n)
}

// ServerConfig configures [NewServer]. The zero value is usable.
type ServerConfig struct {
	// Token, if not empty, is the bearer token every request but
	// GET /healthz must carry ("Authorization: Bearer TOKEN"); others get
	// 401.
	Token string
	// DefaultTTL is the lease TTL of a PUT without ttl_ms (default
	// DefaultLeaseTTL).
	DefaultTTL time.Duration
	// MinTTL and MaxTTL bound ttl_ms (defaults DefaultMinLeaseTTL and
	// DefaultMaxLeaseTTL; MaxTTL is at most HardMaxLeaseTTL); a TTL
	// outside them is a 400.
	MinTTL, MaxTTL time.Duration
	// SweepInterval is how often expired entries are dropped in the
	// background (default 1 s). Expired entries are invisible at once
	// either way.
	SweepInterval time.Duration
	// MaxEntries bounds the live entries (default DefaultMaxEntries); a PUT
	// beyond it gets 503.
	MaxEntries int
	// MaxBytes bounds the memory of the live entries (default
	// DefaultMaxBytes); a PUT beyond it gets 507. An entry counts as its
	// strings and address plus 256 bytes, and 48 bytes per meta key (about
	// 3/4 of its size in JSON).
	MaxBytes int64
}

// Server is an [http.Handler] serving a registry over HTTP, the server side
// of the [HTTP] backend: a name service for listeners on many hosts.
//
// Entries are leased: each PUT creates a lease of ttl_ms and answers with a
// lease id, the owner token; the entry expires unless the owner refreshes
// it before the TTL runs out, so the entries of a process that crashed
// vanish within one TTL. Only the holder of the lease id can refresh,
// replace or delete the entry. Everything is kept in memory: a restarted
// server is empty until the publishers' refreshers register again.
//
// The JSON API (names and services are path-escaped; errors are
// {"error": "..."} with a 4xx or 5xx status):
//
//	PUT    /v1/entries/{name}[?lease=L]  body: Entry fields + "ttl_ms";
//	                                     201 {"lease","ttl_ms"}; 409 if a live entry
//	                                     holds the name under another lease
//	POST   /v1/entries/{name}/refresh?lease=L
//	                                     (or body {"lease": L}); 200 {"lease","ttl_ms"};
//	                                     404 if absent or expired, 409 if another lease holds it
//	DELETE /v1/entries/{name}?lease=L    204; 404 if absent, 409 if another lease holds it
//	GET    /v1/entries/{name}            200 Entry; 404 if absent or expired
//	GET    /v1/entries[?limit=N&after=C] 200 [Entry...], live entries sorted by name, one page
//	GET    /v1/services/{service}[?...]  200 [Entry...] of that service sorted by name, one page
//	GET    /healthz                      200 {"status":"ok"}; no token needed (with the
//	                                     token, and a token configured, also "entries":N)
//
// Listings are paged: a page holds the entries after the name C
// (?after=C, default from the start), at most N of them (?limit=N,
// default [DefaultPageLimit], at most [MaxPageLimit]) and about
// [MaxPageBytes]; a page that is not the last has the header
// [HeaderNextPage] with the cursor for the next page.
//
// Lease ids are never shown by GET. Request bodies are limited to
// [MaxRequestBody] bytes, entries by [Entry.Validate] (meta to
// [MaxMetaBytes]), leases to [HardMaxLeaseTTL], and all entries together
// to ServerConfig.MaxBytes (a PUT beyond: 507) and MaxEntries (503).
// Close stops the background sweeper.
type Server struct {
	cfg       ServerConfig
	tokenHash [sha256.Size]byte
	now       func() time.Time

	mu      sync.Mutex
	entries map[string]*leaseEntry
	bytes   int64 // sum of entryCost over entries

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type leaseEntry struct {
	e       Entry
	cost    int64 // entryCost(e)
	lease   string
	ttl     time.Duration
	expires time.Time
}

// putRequest is the body of PUT /v1/entries/{name}.
type putRequest struct {
	Entry
	TTLMs int64 `json:"ttl_ms,omitempty"`
}

// leaseResponse answers PUT and refresh.
type leaseResponse struct {
	Lease string `json:"lease"`
	TTLMs int64  `json:"ttl_ms"`
}

type refreshRequest struct {
	Lease string `json:"lease"`
}

type errorResponse struct {
	Error string `json:"error"`
}

// NewServer returns a Server configured by cfg and starts its sweeper; call
// Close to stop it.
func NewServer(cfg ServerConfig) *Server {
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = DefaultLeaseTTL
	}
	if cfg.MinTTL <= 0 {
		cfg.MinTTL = DefaultMinLeaseTTL
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxLeaseTTL
	}
	cfg.MaxTTL = min(cfg.MaxTTL, HardMaxLeaseTTL)
	cfg.MinTTL = min(cfg.MinTTL, HardMaxLeaseTTL)
	if cfg.MaxTTL < cfg.MinTTL {
		cfg.MaxTTL = cfg.MinTTL
	}
	cfg.DefaultTTL = min(max(cfg.DefaultTTL, cfg.MinTTL), cfg.MaxTTL)
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Second
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	s := &Server{
		cfg:     cfg,
		now:     time.Now,
		entries: map[string]*leaseEntry{},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if cfg.Token != "" {
		s.tokenHash = sha256.Sum256([]byte(cfg.Token))
	}
	go s.sweeper()
	return s
}

// Close stops the background sweeper. The handler keeps answering (expired
// entries are still dropped lazily); Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

// Len returns the number of live entries.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	return len(s.entries)
}

func (s *Server) sweeper() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.sweepLocked()
			s.mu.Unlock()
		}
	}
}

func (s *Server) sweepLocked() {
	now := s.now()
	for n, le := range s.entries {
		if !now.Before(le.expires) {
			s.removeLocked(n, le)
		}
	}
}

// removeLocked drops entry name, le, and its cost.
func (s *Server) removeLocked(name string, le *leaseEntry) {
	delete(s.entries, name)
	s.bytes -= le.cost
}

// Bytes returns the memory the live entries take, as counted against
// ServerConfig.MaxBytes.
func (s *Server) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	return s.bytes
}

// liveLocked returns the live entry named name, dropping it if expired.
func (s *Server) liveLocked(name string) *leaseEntry {
	le := s.entries[name]
	if le == nil {
		return nil
	}
	if !s.now().Before(le.expires) {
		s.removeLocked(name, le)
		return nil
	}
	return le
}

func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, errorResponse{Error: fmt.Sprintf(format, args...)})
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow)
}

// authorized checks the bearer token in constant time.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(h[:], s.tokenHash[:]) == 1
}

// ServeHTTP implements [http.Handler]. It routes on the escaped path itself
// (rather than through http.ServeMux) so that every valid name, "." and
// ".." and names holding "/" included, round-trips.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL == nil {
		writeError(w, http.StatusBadRequest, "no request URL")
		return
	}
	path := r.URL.EscapedPath()
	if path == "/healthz" {
		s.healthz(w, r)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ucxnet registry"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBody)
	}
	switch {
	case path == "/v1/entries" || path == "/v1/entries/":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		s.list(w, r, func(Entry) bool { return true })
	case strings.HasPrefix(path, "/v1/entries/"):
		s.serveEntry(w, r, path[len("/v1/entries/"):])
	case strings.HasPrefix(path, "/v1/services/"):
		seg := path[len("/v1/services/"):]
		svc, err := url.PathUnescape(seg)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad escaping in service %q: %v", seg, err)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		s.list(w, r, func(e Entry) bool { return e.Service == svc })
	default:
		writeError(w, http.StatusNotFound, "no such resource %q (see /v1/entries/{name}, /v1/services/{service}, /healthz)", r.URL.Path)
	}
}

// healthz answers /healthz: liveness for anyone, and the number of entries
// for a token holder.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	body := map[string]any{"status": "ok"}
	if s.cfg.Token != "" && s.authorized(r) {
		body["entries"] = s.Len()
	}
	writeJSON(w, http.StatusOK, body)
}

// serveEntry routes a request under /v1/entries/: rest is the escaped
// name, possibly followed by "/refresh".
func (s *Server) serveEntry(w http.ResponseWriter, r *http.Request, rest string) {
	seg, action, hasAction := strings.Cut(rest, "/")
	name, err := url.PathUnescape(seg)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad escaping in name %q: %v", seg, err)
		return
	}
	if err := ValidName(name); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	switch {
	case !hasAction:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.get(w, name)
		case http.MethodPut:
			s.put(w, r, name)
		case http.MethodDelete:
			s.delete(w, r, name)
		default:
			methodNotAllowed(w, r, "GET, HEAD, PUT, DELETE")
		}
	case action == "refresh":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		s.refresh(w, r, name)
	default:
		writeError(w, http.StatusNotFound, "no such resource %q (names must be path-escaped: %q)", r.URL.Path, url.PathEscape(name+"/"+action))
	}
}
