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
	"strconv"
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
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		// Liveness only for strangers: how many entries the registry
		// holds is for token holders.
		body := map[string]any{"status": "ok"}
		if s.cfg.Token != "" && s.authorized(r) {
			body["entries"] = s.Len()
		}
		writeJSON(w, http.StatusOK, body)
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
		s.list(w, r, func(e Entry) bool { return e.Service == svc })
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

// list answers one page of the live entries that match, sorted by name:
// those after ?after= (a name; default: from the start), at most ?limit=
// of them (default DefaultPageLimit, at most MaxPageLimit) and at most
// MaxPageBytes. If more follow, HeaderNextPage holds the cursor.
func (s *Server) list(w http.ResponseWriter, r *http.Request, match func(Entry) bool) {
	q := r.URL.Query()
	limit := DefaultPageLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "limit %q: want a positive number (at most %d)", v, MaxPageLimit)
			return
		}
		limit = min(n, MaxPageLimit)
	}
	after := q.Get("after")
	out := []Entry{}
	more := false
	s.mu.Lock()
	s.sweepLocked()
	names := make([]string, 0, min(len(s.entries), 1024))
	for n, le := range s.entries {
		if n > after && match(le.e) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var size int64
	for _, n := range names {
		le := s.entries[n]
		if len(out) >= limit || len(out) > 0 && size+le.cost > MaxPageBytes {
			more = true
			break
		}
		out = append(out, le.e.clone())
		size += le.cost
	}
	s.mu.Unlock()
	if more {
		w.Header().Set(HeaderNextPage, url.QueryEscape(out[len(out)-1].Name))
	}
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
		cost := entryCost(req.Entry)
		if s.bytes-old.cost+cost > s.cfg.MaxBytes {
			writeError(w, http.StatusInsufficientStorage, "registry full: entries take %d of %d bytes", s.bytes, s.cfg.MaxBytes)
			return
		}
		s.bytes += cost - old.cost
		old.e, old.cost, old.ttl, old.expires = req.Entry.clone(), cost, ttl, s.now().Add(ttl)
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
	cost := entryCost(req.Entry)
	if s.bytes+cost > s.cfg.MaxBytes {
		s.sweepLocked()
		if s.bytes+cost > s.cfg.MaxBytes {
			writeError(w, http.StatusInsufficientStorage, "registry full: entries take %d of %d bytes", s.bytes, s.cfg.MaxBytes)
			return
		}
	}
	le := &leaseEntry{e: req.Entry.clone(), cost: cost, lease: newLeaseID(), ttl: ttl, expires: s.now().Add(ttl)}
	s.entries[name] = le
	s.bytes += cost
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
	if le := s.ownedLocked(w, name, lease, ""); le != nil {
		s.removeLocked(name, le)
		w.WriteHeader(http.StatusNoContent)
	}
}
