package session

// Resources a Transport lends its conns: recycled read buffers, and the
// tokens of UCX operations (flushes, zero-copy sends) whose end an event
// reports.

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// maxFreeBufs bounds the recycled read buffers a transport keeps.
const maxFreeBufs = 256

// opTable holds the UCX operations (flushes, zero-copy sends) whose end an
// event will report, by token.
type opTable struct {
	mu  sync.Mutex
	seq uint64
	ops map[uint64]chan error
}

// add registers a UCX operation (a flush or a zero-copy send) that
// reports its end with an event carrying token.
func (o *opTable) add() (token uint64, done <-chan error) {
	ch := make(chan error, 1)
	o.mu.Lock()
	o.seq++
	token = o.seq
	o.ops[token] = ch
	o.mu.Unlock()
	return token, ch
}

// forget drops an operation that will not (or need not) report its end.
func (o *opTable) forget(token uint64) {
	o.mu.Lock()
	delete(o.ops, token)
	o.mu.Unlock()
}

// done delivers an operation's end (engine goroutine).
func (o *opTable) done(token uint64, err error) {
	o.mu.Lock()
	ch := o.ops[token]
	delete(o.ops, token)
	o.mu.Unlock()
	if ch != nil {
		ch <- err
	}
}

// failAll ends every operation still registered with st: after the engine
// closed, no event will end them.
func (o *opTable) failAll(err error) {
	o.mu.Lock()
	ops := o.ops
	o.ops = make(map[uint64]chan error)
	o.mu.Unlock()
	for _, ch := range ops {
		ch <- err
	}
}

// errConnFailed is what flush returns when its failed channel closes: the
// conn it waited for failed meanwhile, and the conn's own error says why.
var errConnFailed = errors.New("ucxnet: conn failed during flush")

// flush waits until every send issued so far on p's endpoint is handed to
// the transport, until expired is closed (timeoutError), until stop is
// closed (net.ErrClosed) or until failed is closed (errConnFailed); a nil
// channel never is.
func (p *peer) flush(expired, stop, failed <-chan struct{}) error {
	t := p.sh.t
	token, ch := t.ops.add()
	var done bool
	err := p.use(func(ep engine.EP) (err error) {
		w := p.sh.acquire()
		done, err = w.Flush(ep, token)
		p.sh.giveBack(w)
		return err
	})
	if done || err != nil {
		t.ops.forget(token)
		return err
	}
	select {
	case st := <-ch:
		if st != nil {
			return withDetail(ErrReset, "flush: %v", st)
		}
		return nil
	case <-expired:
		t.ops.forget(token)
		return timeoutError{}
	case <-stop:
		t.ops.forget(token)
		return net.ErrClosed
	case <-failed:
		t.ops.forget(token)
		return errConnFailed
	}
}

// flushWithin is flush with a timeout of d.
func (p *peer) flushWithin(d time.Duration) error {
	expired := make(chan struct{})
	timer := time.AfterFunc(d, func() { close(expired) })
	defer timer.Stop()
	return p.flush(expired, nil, nil)
}
