package session

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/ucxnet/ucxnet/internal/lane"
	"github.com/ucxnet/ucxnet/registry"
)

// DefaultDialTimeout bounds a dial whose Dialer has no Timeout and whose
// context has no deadline, so that a silent peer cannot hang it.
const DefaultDialTimeout = 30 * time.Second

// abandonedTTL is how long a dial given up on waits for a late answer (to
// reset the listener's side) before it is forgotten.
const abandonedTTL = time.Minute

// Dialer dials ucxnet names. The zero value dials on the default
// transport. Its fields mean what ucxnet.Dialer's do (Transport is the
// session's): ucxnet's copies them, and a test there checks that the two
// have the same fields in the same order.
type Dialer struct {
	Timeout   time.Duration
	Transport *Transport
	PSK       []byte
	KeepAlive time.Duration
}

// DialStream connects to the listener published as address: a registry
// name ("host:port" that is not a name itself is tried as "host"). A name
// with no live listener fails at once with an error matching
// syscall.ECONNREFUSED; a dial that runs out of time fails with a timeout
// error matching context.DeadlineExceeded, as the net package's does. Its
// errors are bare (the face wraps them in a *net.OpError).
func (d *Dialer) DialStream(ctx context.Context, address string) (Stream, error) {
	t := d.Transport
	if t == nil {
		return nil, errNoTransport
	}
	psk, err := resolvePSK(d.PSK)
	if err != nil {
		return nil, err
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t.stats.dials.Add(1)
	c, err := d.dialName(ctx, t, address, psk)
	if err != nil {
		if err == ctx.Err() {
			return nil, mapCtxErr(err)
		}
		return nil, err
	}
	return c, nil
}

// dialName resolves address and dials its listener on the lane t picks
// for it: kernel TCP where UCX would only have tcp.
func (d *Dialer) dialName(ctx context.Context, t *Transport, address string, psk []byte) (Stream, error) {
	e, err := t.resolve(ctx, address)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch, eps := t.policy.decide(e)
	if err := laneRefused(ch); err != nil {
		return nil, err
	}
	t.log.event(slog.LevelDebug, "ucxnet: dial", "to", e.Name, "lane", ch.Lane, "reason", ch.Reason)
	return d.dialLane(ctx, t, e, ch, eps, psk)
}

// dialLane dials e on the lane ch chose. A kernel-TCP dial whose TCP
// connection fails (laneDown: refused, reset, or silent for half the time
// left) takes the UCX lane when ch allows it; a listener's refusal stays.
func (d *Dialer) dialLane(ctx context.Context, t *Transport, e registry.Entry, ch lane.Choice, eps []netip.AddrPort, psk []byte) (Stream, error) {
	if ch.Lane != LaneTCP {
		return ucxStream(d.dialUCX(ctx, t, e, ch.Reason, psk))
	}
	ka := t.cfg.KeepAlive
	if d.KeepAlive != 0 {
		ka = d.KeepAlive
	}
	tctx, cancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok && ch.Fallback {
		tctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
	}
	c, err := t.dialTCP(tctx, e, eps, psk, Addr{Name: e.Name}, ch.Reason, ka)
	silent := tctx.Err() != nil
	cancel()
	if err == nil {
		return c, nil
	}
	var down laneDown
	if !ch.Fallback || ctx.Err() != nil || !errors.As(err, &down) && !silent {
		return nil, err
	}
	t.log.event(slog.LevelInfo, "ucxnet: the kernel tcp lane failed; dialing over UCX", "to", e.Name, "err", err)
	return ucxStream(d.dialUCX(ctx, t, e, lane.ReasonFallback+" ("+err.Error()+")", psk))
}

// dialUCX dials e's listener over UCX: it attaches a new conn to e's
// worker, sends CONNECT and waits for the answer.
func (d *Dialer) dialUCX(ctx context.Context, t *Transport, e registry.Entry, why string, psk []byte) (*Conn, error) {
	c := newConn(t, nil, Addr{}, Addr{Name: e.Name}, t.cfg.Window)
	c.sh = t.dialShard()
	c.hs.workers = t.multi()
	c.laneWhy = why
	if d.KeepAlive != 0 {
		c.keepAlive = keepAliveOf(d.KeepAlive)
	}
	c.hs.auth = newDialAuth(psk, e.Name)
	if why := t.policy.releaseClash(e); why != "" {
		return nil, withDetail(ErrRefused, "%s", why)
	}
	t.kc.ensure(ctx, e.Address)
	c.laneWhy = joinWhy(c.laneWhy, t.kc.shmWhyNot(e.Address))
	if err := t.attach(e.Address, c, true, nil, 0); err != nil {
		if err == ErrTransportClosed {
			return nil, err
		}
		return nil, withDetail(ErrRefused, "%v%s", err, t.releasePair(e))
	}
	if err := c.hs.sendConnect(e.Name); err != nil {
		c.terminate(err, EndQuiet)
		return nil, withDetail(ErrRefused, "sending CONNECT: %v", err)
	}
	c, err := c.hs.awaitAnswer(ctx, e)
	if err == nil {
		t.sweepUCXFDs()
	}
	return c, err
}

// answered returns what c's dial got, once its answer came.
func (hs *handshake) answered() (*Conn, error) {
	c := hs.c
	c.mu.Lock()
	derr := c.dErr
	c.mu.Unlock()
	if derr != nil {
		return nil, derr
	}
	return c, nil
}

// awaitAnswer waits for the answer to c's CONNECT to e's listener,
// sending the CONNECT again while none comes (connectRTO, resendConnect).
// A listener's engine answers at once, whatever its application does: no
// answer within answerWait (time for UCX to wire up a first endpoint
// too) means its process is gone (a killed process over shared memory can
// look alive to UCX).
func (hs *handshake) awaitAnswer(ctx context.Context, e registry.Entry) (*Conn, error) {
	c := hs.c
	var noAnswer <-chan time.Time
	wait := answerWait(c.keepAlive)
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		noAnswer = timer.C
	}
	rto := connectRTO
	resend := time.NewTimer(rto)
	defer resend.Stop()
	var giveUp error
	unanswered := false
	for n := 0; giveUp == nil; n++ {
		select {
		case <-c.hs.dialDone:
			return c.hs.answered()
		case <-ctx.Done():
			giveUp = ctx.Err()
		case <-noAnswer:
			unanswered = true
			giveUp = withDetail(ErrRefused, "no answer from listener %q within %v%s", e.Name, wait, c.t.releasePair(e))
		case <-c.t.closing:
			c.terminate(ErrTransportClosed, EndQuiet)
			return nil, ErrTransportClosed
		case <-resend.C:
			c.hs.resendConnect(e.Name, n)
			rto = min(2*rto, maxConnectRTO)
			resend.Reset(rto)
		}
	}
	c.hs.abandonDial()
	if unanswered {
		c.hs.markUnanswered()
	}
	return nil, giveUp
}

// maxAnswerIdle caps the keepalive idle time that answerWait doubles.
const maxAnswerIdle = 1500 * time.Millisecond

// answerWait is how long a dial waits for its CONNECT's answer: twice
// the keepalive's idle time, at most twice maxAnswerIdle (a listener's
// engine answers at once, whatever its application does); 0 if
// keepalives are off (only the caller's deadline ends the wait).
func answerWait(k KeepAlive) time.Duration {
	if !k.On() {
		return 0
	}
	return 2 * min(k.Idle, maxAnswerIdle)
}

// abandonDial gives up on c's dial: a conn answered meanwhile is closed;
// else c is abandoned, its answer, if one comes, reset, and c removed after
// abandonedTTL rather than kept waiting for it forever.
func (hs *handshake) abandonDial() {
	c := hs.c
	c.mu.Lock()
	select {
	case <-c.hs.dialDone: // answered meanwhile
		derr := c.dErr
		c.mu.Unlock()
		if derr == nil {
			c.Close()
		}
	default:
		c.state.Phase = PhaseAbandoned
		c.mu.Unlock()
		time.AfterFunc(abandonedTTL, func() {
			c.mu.Lock()
			stale := c.state.Phase == PhaseAbandoned
			if stale {
				c.state.Phase = PhaseDone
			}
			c.mu.Unlock()
			if stale {
				c.t.removeConn(c)
			}
		})
	}
}

// mapCtxErr turns context.DeadlineExceeded into a timeout error, as the
// net package does.
func mapCtxErr(err error) error {
	if err == context.DeadlineExceeded {
		return timeoutError{}
	}
	return err
}

type timeoutError struct{}

// Error returns "i/o timeout", as the net package's timeout does.
func (timeoutError) Error() string { return "i/o timeout" }

// Timeout reports true.
func (timeoutError) Timeout() bool { return true }

// Temporary reports true, as the net package's timeout does.
func (timeoutError) Temporary() bool { return true }

// Is makes a dial timeout match context.DeadlineExceeded, as the net
// package's does.
func (timeoutError) Is(err error) bool { return err == context.DeadlineExceeded }

func formatID(id uint64) string {
	const hex = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hex[id&15]
		id >>= 4
	}
	return string(b[:])
}
