package ucxetcd

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ucxnet/ucxnet/registry"
)

// Watch returns a channel that receives the live instances of service
// (as [Registry.Instances] lists them, but without deleting anything) at
// once and then every time the list changes, until ctx ends, when the
// channel is closed. A reader that falls behind gets only the latest list.
// Watch survives etcd restarts and compactions by listing again.
//
// Close ends every watch (closing its channel) and waits for it; a Watch
// after Close returns a closed channel.
func (r *Registry) Watch(ctx context.Context, service string) <-chan []registry.Entry {
	out := make(chan []registry.Entry)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		close(out)
		return out
	}
	r.watchers.Add(1)
	r.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(r.closing, cancel)
	go func() {
		defer r.watchers.Done()
		defer cancel()
		defer unhook()
		r.watch(wctx, service, out)
	}()
	return out
}

// watch follows the instances of service into out until ctx ends: it
// lists them, then follows etcd's events from the listing's revision; when
// the event stream breaks (etcd restarted, the revision was compacted) it
// lists again.
func (r *Registry) watch(ctx context.Context, service string, out chan<- []registry.Entry) {
	defer close(out)
	w := &watcher{r: r, ctx: ctx, service: service, out: out, first: true}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		rev, err := w.list()
		if err != nil {
			if ctx.Err() == nil {
				r.report(fmt.Errorf("ucxetcd: watching %q in %s: %w", service, r, err))
			}
			if !w.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if !w.follow(rev) || !w.sleep(100*time.Millisecond) {
			return
		}
	}
}

// watcher is the state of one Watch: the instances it knows and the list
// it has yet to deliver.
type watcher struct {
	r       *Registry
	ctx     context.Context
	service string
	out     chan<- []registry.Entry

	cur         map[string]watched // key → entry of service
	pending     []registry.Entry   // the list to deliver, if havePending
	havePending bool
	lastSig     []string // revision and name of each entry last emitted
	first       bool     // nothing emitted yet
}

// watched is an entry as Watch last saw it.
type watched struct {
	e   registry.Entry
	rev int64
}

// send is out while a list is pending, else nil (a select case that never
// fires).
func (w *watcher) send() chan<- []registry.Entry {
	if w.havePending {
		return w.out
	}
	return nil
}

// sleep waits d, delivering a pending list meanwhile; false if ctx ended.
func (w *watcher) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return false
		case <-t.C:
			return true
		case w.send() <- w.pending:
			w.havePending = false
		}
	}
}

// list reads every entry, keeps those of the service, emits them and
// returns the revision of the read.
func (w *watcher) list() (int64, error) {
	octx, cancel := w.r.opCtx(w.ctx)
	resp, err := w.r.cli.Get(octx, w.r.entriesPrefix(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return 0, err
	}
	w.cur = map[string]watched{}
	for _, kv := range resp.Kvs {
		w.apply(kv)
	}
	w.emit()
	return resp.Header.Revision, nil
}

// follow applies etcd's events after revision rev, emitting after each
// batch and delivering what is pending, until the event stream ends (it
// returns true) or ctx does (false).
func (w *watcher) follow(rev int64) bool {
	wctx, wcancel := context.WithCancel(w.ctx)
	defer wcancel()
	wch := w.r.cli.Watch(clientv3.WithRequireLeader(wctx), w.r.entriesPrefix(),
		clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		select {
		case <-w.ctx.Done():
			return false
		case w.send() <- w.pending:
			w.havePending = false
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled {
				return true
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					delete(w.cur, string(ev.Kv.Key))
				} else {
					w.apply(ev.Kv)
				}
			}
			w.emit()
		}
	}
}

// apply records kv if it is a sound entry of the service, and forgets its
// key otherwise.
func (w *watcher) apply(kv *mvccpb.KeyValue) {
	e, bad, _ := w.r.check(kv)
	if bad != "" || e.Service != w.service {
		delete(w.cur, string(kv.Key))
		return
	}
	w.cur[string(kv.Key)] = watched{e: e, rev: kv.ModRevision}
}

// emit makes the current list pending if it differs from the last one
// emitted (by names and revisions), or if it is the first.
func (w *watcher) emit() {
	list := make([]registry.Entry, 0, len(w.cur))
	for _, x := range w.cur {
		list = append(list, x.e)
	}
	sortEntries(list)
	sig := make([]string, 0, len(list))
	for _, e := range list {
		sig = append(sig, fmt.Sprintf("%d %s", w.cur[w.r.Key(e.Name)].rev, e.Name))
	}
	if w.first || !slices.Equal(sig, w.lastSig) {
		w.first = false
		w.lastSig = sig
		w.pending, w.havePending = list, true
	}
}
