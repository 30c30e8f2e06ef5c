package registry

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
)

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
