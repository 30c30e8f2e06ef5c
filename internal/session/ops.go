package session

// Resources a Transport lends its conns: recycled read buffers, and the
// tokens of UCX operations (flushes, zero-copy sends) whose end an event
// reports.

import (
	"errors"
	"net"
	"time"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// maxFreeBufs bounds the recycled read buffers a transport keeps.
const maxFreeBufs = 256

// newOp registers a UCX operation (a flush or a zero-copy send) that
// reports its end with an event carrying token.
func (t *Transport) newOp() (token uint64, done <-chan error) {
	ch := make(chan error, 1)
	t.opMu.Lock()
	t.opSeq++
	token = t.opSeq
	t.ops[token] = ch
	t.opMu.Unlock()
	return token, ch
}

// forgetOp drops an operation that will not (or need not) report its end.
func (t *Transport) forgetOp(token uint64) {
	t.opMu.Lock()
	delete(t.ops, token)
	t.opMu.Unlock()
}

// opDone delivers an operation's end (engine goroutine).
func (t *Transport) opDone(token uint64, err error) {
	t.opMu.Lock()
	ch := t.ops[token]
	delete(t.ops, token)
	t.opMu.Unlock()
	if ch != nil {
		ch <- err
	}
}

// failOps ends every operation still registered with st: after the engine
// closed, no event will end them.
func (t *Transport) failOps(err error) {
	t.opMu.Lock()
	ops := t.ops
	t.ops = make(map[uint64]chan error)
	t.opMu.Unlock()
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
func (t *Transport) flush(p *peer, expired, stop, failed <-chan struct{}) error {
	token, ch := t.newOp()
	var done bool
	err := p.use(func(ep engine.EP) (err error) {
		w := p.sh.acquire()
		done, err = w.Flush(ep, token)
		p.sh.giveBack(w)
		return err
	})
	if done || err != nil {
		t.forgetOp(token)
		return err
	}
	select {
	case st := <-ch:
		if st != nil {
			return withDetail(ErrReset, "flush: %v", st)
		}
		return nil
	case <-expired:
		t.forgetOp(token)
		return timeoutError{}
	case <-stop:
		t.forgetOp(token)
		return net.ErrClosed
	case <-failed:
		t.forgetOp(token)
		return errConnFailed
	}
}

// flushWithin is flush with a timeout of d.
func (t *Transport) flushWithin(p *peer, d time.Duration) error {
	expired := make(chan struct{})
	timer := time.AfterFunc(d, func() { close(expired) })
	defer timer.Stop()
	return t.flush(p, expired, nil, nil)
}
