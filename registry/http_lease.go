package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// httpLease is one registration and its refresher.
type httpLease struct {
	e      Entry
	ctx    context.Context // canceled by halt
	cancel context.CancelFunc
	done   chan struct{} // closed when the refresher has returned

	mu    sync.Mutex
	lease string
	err   error // last refresh error, nil after a success
}

// put creates (or, with lease, replaces) the entry and returns its lease.
func (h *HTTP) put(ctx context.Context, e Entry, lease string) (string, error) {
	path := entryPath(e.Name)
	if lease != "" {
		path += "?lease=" + url.QueryEscape(lease)
	}
	var resp leaseResponse
	err := h.do(ctx, http.MethodPut, path, putRequest{Entry: e, TTLMs: h.ttl.Milliseconds()}, &resp)
	if err != nil {
		if statusOf(err) == http.StatusConflict {
			return "", fmt.Errorf("%w: %q: %w", ErrNameInUse, e.Name, err)
		}
		return "", err
	}
	if resp.Lease == "" {
		return "", fmt.Errorf("registry %s: PUT %s: answer without a lease", h.base, path)
	}
	return resp.Lease, nil
}

// Register leases e.Name on the server and starts refreshing the lease. A
// live entry of that name, from this or another publisher, gives an error
// wrapping ErrNameInUse.
func (h *HTTP) Register(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	e = e.clone()
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return fmt.Errorf("registry %s: closed", h.base)
	}
	lease, err := h.put(ctx, e, "")
	if err != nil {
		return err
	}
	l := &httpLease{e: e, lease: lease, done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = h.deleteLease(context.Background(), e.Name, lease)
		return fmt.Errorf("registry %s: closed", h.base)
	}
	old := h.regs[e.Name]
	h.regs[e.Name] = l
	h.mu.Unlock()
	if old != nil {
		// Our earlier lease of this name was lost (it expired) and the
		// server gave the name out again: its refresher is obsolete.
		old.halt()
	}
	go h.refresher(l)
	return nil
}

// halt stops the refresher of l and waits for it.
func (l *httpLease) halt() {
	l.cancel()
	<-l.done
}

// refresher keeps l alive until l.ctx is canceled; it is the one goroutine
// of a registration.
func (h *HTTP) refresher(l *httpLease) {
	defer close(l.done)
	period := max(h.ttl/3, 10*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	ctx := l.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A request may not outlive the lease it tries to save.
		rctx, rcancel := context.WithTimeout(ctx, max(h.ttl-period, period))
		err := h.refreshOnce(rctx, l)
		rcancel()
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
	}
}

// refreshOnce refreshes l's lease, registering the entry again if the
// server no longer knows the lease.
func (h *HTTP) refreshOnce(ctx context.Context, l *httpLease) error {
	l.mu.Lock()
	lease := l.lease
	l.mu.Unlock()
	err := h.do(ctx, http.MethodPost, entryPath(l.e.Name)+"/refresh?lease="+url.QueryEscape(lease), nil, nil)
	switch statusOf(err) {
	case http.StatusNotFound, http.StatusConflict:
		// The lease is gone: the server restarted or we were stalled past
		// the TTL. Publish again; a 409 here means someone else holds the
		// name now, and we keep trying in case it goes.
		nl, perr := h.put(ctx, l.e, "")
		if perr != nil {
			return perr
		}
		l.mu.Lock()
		l.lease = nl
		l.mu.Unlock()
		return nil
	}
	return err
}

// stopRefreshing stops the refresher of name without deleting the entry,
// as a crash would: a test hook.
func (h *HTTP) stopRefreshing(name string) bool {
	h.mu.Lock()
	l := h.regs[name]
	delete(h.regs, name)
	h.mu.Unlock()
	if l == nil {
		return false
	}
	l.halt()
	return true
}

func (h *HTTP) deleteLease(ctx context.Context, name, lease string) error {
	err := h.do(ctx, http.MethodDelete, entryPath(name)+"?lease="+url.QueryEscape(lease), nil, nil)
	switch statusOf(err) {
	case http.StatusNotFound, http.StatusConflict:
		return nil // gone already, or no longer ours
	}
	return err
}

// Unregister stops refreshing name and deletes its entry, if this HTTP
// value registered it; otherwise it does nothing.
func (h *HTTP) Unregister(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	l := h.regs[name]
	delete(h.regs, name)
	h.mu.Unlock()
	if l == nil {
		return nil
	}
	l.halt()
	l.mu.Lock()
	lease := l.lease
	l.mu.Unlock()
	return h.deleteLease(ctx, name, lease)
}
