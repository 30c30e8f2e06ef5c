package registry

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
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
	// DefaultMaxEntries bounds the number of live entries a Server holds.
	DefaultMaxEntries = 100000
	// MaxRequestBody is the largest request body a Server reads.
	MaxRequestBody = 64 << 10
)

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
	// DefaultMaxLeaseTTL); a TTL outside them is a 400.
	MinTTL, MaxTTL time.Duration
	// SweepInterval is how often expired entries are dropped in the
	// background (default 1 s). Expired entries are invisible at once
	// either way.
	SweepInterval time.Duration
	// MaxEntries bounds the live entries (default DefaultMaxEntries); a PUT
	// beyond it gets 503.
	MaxEntries int
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
//	GET    /v1/entries                   200 [Entry...], every live entry sorted by name
//	GET    /v1/services/{service}        200 [Entry...] of that service sorted by name
//	GET    /healthz                      200 {"status":"ok","entries":N}; no token needed
//
// Lease ids are never shown by GET. Request bodies are limited to
// [MaxRequestBody] bytes. Close stops the background sweeper.
type Server struct {
	cfg       ServerConfig
	tokenHash [sha256.Size]byte
	now       func() time.Time

	mu      sync.Mutex
	entries map[string]*leaseEntry

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type leaseEntry struct {
	e       Entry
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
			delete(s.entries, n)
		}
	}
}

// liveLocked returns the live entry named name, dropping it if expired.
func (s *Server) liveLocked(name string) *leaseEntry {
	le := s.entries[name]
	if le == nil {
		return nil
	}
	if !s.now().Before(le.expires) {
		delete(s.entries, name)
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
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "entries": s.Len()})
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
		s.list(w, func(Entry) bool { return true })
	case strings.HasPrefix(path, "/v1/entries/"):
		seg, action, hasAction := strings.Cut(path[len("/v1/entries/"):], "/")
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
		s.list(w, func(e Entry) bool { return e.Service == svc })
	default:
		writeError(w, http.StatusNotFound, "no such resource %q (see /v1/entries/{name}, /v1/services/{service}, /healthz)", r.URL.Path)
	}
}

func (s *Server) get(w http.ResponseWriter, name string) {
	s.mu.Lock()
	le := s.liveLocked(name)
	var e Entry
	if le != nil {
		e = le.e.clone()
	}
	s.mu.Unlock()
	if le == nil {
		writeError(w, http.StatusNotFound, "%q not found", name)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func (s *Server) list(w http.ResponseWriter, match func(Entry) bool) {
	out := []Entry{}
	s.mu.Lock()
	s.sweepLocked()
	for _, le := range s.entries {
		if match(le.e) {
			out = append(out, le.e.clone())
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
}

// decodeBody decodes the JSON body of r into v: exactly one JSON value.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Body == nil {
		writeError(w, http.StatusBadRequest, "empty body: want JSON")
		return false
	}
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON value")
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, "body exceeds %d bytes", mbe.Limit)
		case errors.Is(err, io.EOF):
			writeError(w, http.StatusBadRequest, "empty body: want JSON")
		default:
			writeError(w, http.StatusBadRequest, "bad JSON body: %v", err)
		}
		return false
	}
	return true
}

func (s *Server) ttlFrom(ms int64) (time.Duration, error) {
	if ms == 0 {
		return s.cfg.DefaultTTL, nil
	}
	if ms < 0 || ms > int64(s.cfg.MaxTTL/time.Millisecond) || time.Duration(ms)*time.Millisecond < s.cfg.MinTTL {
		return 0, fmt.Errorf("ttl_ms %d out of range [%d, %d]", ms, s.cfg.MinTTL.Milliseconds(), s.cfg.MaxTTL.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, name string) {
	var req putRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == "" {
		req.Name = name
	}
	if req.Name != name {
		writeError(w, http.StatusBadRequest, "entry name %q differs from the name %q in the path", req.Name, name)
		return
	}
	if err := req.Entry.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ttl, err := s.ttlFrom(req.TTLMs)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	lease := r.URL.Query().Get("lease")
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.liveLocked(name); old != nil {
		if lease == "" || subtle.ConstantTimeCompare([]byte(lease), []byte(old.lease)) != 1 {
			writeError(w, http.StatusConflict, "%s: %q is registered by pid %d on %q", ErrNameInUse, name, old.e.PID, old.e.Host)
			return
		}
		// The owner replaces its entry and keeps its lease.
		old.e, old.ttl, old.expires = req.Entry.clone(), ttl, s.now().Add(ttl)
		writeJSON(w, http.StatusOK, leaseResponse{Lease: old.lease, TTLMs: ttl.Milliseconds()})
		return
	}
	if len(s.entries) >= s.cfg.MaxEntries {
		s.sweepLocked()
		if len(s.entries) >= s.cfg.MaxEntries {
			writeError(w, http.StatusServiceUnavailable, "registry full: %d entries", len(s.entries))
			return
		}
	}
	le := &leaseEntry{e: req.Entry.clone(), lease: newLeaseID(), ttl: ttl, expires: s.now().Add(ttl)}
	s.entries[name] = le
	writeJSON(w, http.StatusCreated, leaseResponse{Lease: le.lease, TTLMs: ttl.Milliseconds()})
}

// leaseOf returns the lease id of a refresh or delete: ?lease=, or for a
// refresh also the JSON body {"lease": ...}.
func leaseOf(w http.ResponseWriter, r *http.Request, body bool) (string, bool) {
	if l := r.URL.Query().Get("lease"); l != "" {
		return l, true
	}
	if body && r.Body != nil && r.ContentLength != 0 {
		var req refreshRequest
		if !decodeBody(w, r, &req) {
			return "", false
		}
		if req.Lease != "" {
			return req.Lease, true
		}
	}
	writeError(w, http.StatusBadRequest, "lease id missing: pass ?lease=ID")
	return "", false
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request, name string) {
	lease, ok := leaseOf(w, r, true)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if le := s.ownedLocked(w, name, lease, " (expired, deleted or the registry restarted)"); le != nil {
		le.expires = s.now().Add(le.ttl)
		writeJSON(w, http.StatusOK, leaseResponse{Lease: le.lease, TTLMs: le.ttl.Milliseconds()})
	}
}

// ownedLocked returns the live entry name if lease holds it; otherwise it
// answers 404 (with why appended) or 409 and returns nil. s.mu is held.
func (s *Server) ownedLocked(w http.ResponseWriter, name, lease, why string) *leaseEntry {
	le := s.liveLocked(name)
	switch {
	case le == nil:
		writeError(w, http.StatusNotFound, "%q not found%s", name, why)
		return nil
	case subtle.ConstantTimeCompare([]byte(lease), []byte(le.lease)) != 1:
		writeError(w, http.StatusConflict, "%q is held by another lease", name)
		return nil
	}
	return le
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, name string) {
	lease, ok := leaseOf(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownedLocked(w, name, lease, "") != nil {
		delete(s.entries, name)
		w.WriteHeader(http.StatusNoContent)
	}
}
