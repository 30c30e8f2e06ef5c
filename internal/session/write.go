package session

// The write side of a Conn: Write, flow control towards the peer, and
// zero-copy sends.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/internal/deadline"
	"github.com/ucxnet/ucxnet/internal/engine"
	"github.com/ucxnet/ucxnet/internal/stream"
)

func (c *Conn) sendWindow(limit uint64) {
	_ = c.peer().sendCtl(stream.Header{Kind: stream.KindWindow, ConnID: c.remoteID, Aux: limit})
}

// Write writes data to the stream. It returns once all of b is committed and
// nothing holds b any more — taken by UCX inline, copied into C-owned
// buffers that the send owns until it completes, (over shared memory, for
// ZeroCopyMin bytes or more) sent straight from b, pinned until UCX reports
// it sent, or (a small write that finds the engine busy or backed up)
// copied into the conn's open frame, which the transport sends within
// microseconds, coalesced with the writes that follow: b may be reused at
// once. On an error, n says how many bytes were committed (on a reset
// conn, at least that many may have reached the peer). Write blocks while
// the peer's receive window is full, and while UCX holds more than it could
// send to the peer (its shared-memory FIFO or socket full: 1 MiB of small
// writes over shared memory, 8 MiB over TCP, or 32 MiB to all peers of
// the conn's worker), as a write to a full socket buffer does, until the
// write deadline passes (os.ErrDeadlineExceeded), which is checked before
// each part is committed. Errors are bare, as Read's.
func (c *Conn) Write(b []byte) (int, error) {
	dl := &c.wd
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	drained := false // the peer was just drained: send without checking again
	c.mu.Lock()
	for {
		chunk, cancel, err := c.writeReady(n, len(b), dl)
		c.mu.Unlock()
		if err != nil || chunk == 0 {
			return n, err
		}
		sp := c.peer().path(c.t)
		frame := min(c.frame, sp.Frame, sp.PeerLimit(c.peerSegs))
		small := chunk <= min(frame, coalesceMax)/2
		sent, err := c.sendChunk(sp, frame, small, !drained, b[n:n+chunk], dl)
		drained = false
		if err == errBackedUp {
			if err := c.drainPeer(cancel); err != nil {
				if err == os.ErrDeadlineExceeded || err == net.ErrClosed {
					return n, err
				}
				c.mu.Lock()
				if c.werr == nil {
					c.werr = err
				}
				continue
			}
			drained = true
			c.mu.Lock()
			continue
		}
		c.t.stats.bytesOut.Add(uint64(sent))
		c.cnt.bytesOut.Add(uint64(sent))
		n += sent

		c.mu.Lock()
		c.swin.Consume(sent)
		if err != nil && c.werr == nil {
			c.mu.Unlock()
			c.terminate(withDetail(ErrReset, "%v", err), EndGap)
			c.mu.Lock()
		}
	}
}

// writeReady waits until a write of total bytes, n of them committed, may
// send more: it returns the part of the rest that the peer's receive window
// allows, and the write deadline dl's channel. It returns 0 and a nil
// error once n is total, and the error the write returns once it cannot go
// on (conn closed or failed, write side shut, dl passed). Called, and
// returns, with c.mu held.
func (c *Conn) writeReady(n, total int, dl Deadline) (chunk int, cancel <-chan struct{}, err error) {
	for {
		if c.state.Closed {
			return 0, nil, net.ErrClosed
		}
		if err := c.out.TakeErr(); err != nil && c.werr == nil {
			c.mu.Unlock()
			c.terminate(err, EndGap) // a queued frame was lost: the stream has a gap
			c.mu.Lock()
			continue
		}
		if c.werr != nil {
			return 0, nil, c.werr
		}
		if c.state.WShut {
			return 0, nil, ErrWriteAfterShutdown
		}
		cancel = dl.Wait()
		if deadline.Closed(cancel) {
			return 0, nil, os.ErrDeadlineExceeded
		}
		if n == total {
			return 0, nil, nil
		}
		avail := c.swin.Available()
		if avail > 0 {
			return min(avail, total-n), cancel, nil
		}
		c.waitLocked(c.wcond, &c.wwait, cancel)
	}
}

// errBackedUp is sendChunk's answer when UCX holds so much that the chunk
// must wait for sends to c's peer to drain first (backedUp): nothing was
// sent.
var errBackedUp = errors.New("ucxnet: peer backed up")

// backedUp reports whether UCX holds so much that a write of a chunk
// (small: a coalescing candidate) to c's peer over sp must first wait for
// sends to the peer to drain, bl being what UCX holds for the peer (its
// Backlog). Any one of these rules holds it back:
//   - the engine holds peerBufferMax, and the peer a quarter of it
//     unflushed;
//   - over shared memory, a small write, with shmSmallBacklog held for the
//     peer;
//   - over tcp, tcpBacklog held for the peer;
//   - the engine holds processBacklog, some of it for the peer.
func (c *Conn) backedUp(sp SendPath, small bool, bl uint64) bool {
	switch {
	case c.peer().unflushed.Load() >= peerBufferMax/4 && c.sh.backlog() >= peerBufferMax:
		return true
	case small && sp.Kind == PathSharedMemory && bl >= shmSmallBacklog:
		return true
	case sp.Kind == PathTCP && bl >= tcpBacklog:
		return true
	}
	return bl > 0 && c.sh.backlog() >= processBacklog
}

// sendChunk sends p, a part of a write that the window allows, as DATA
// frames of at most frame bytes: zero-copy, into the conn's open frame
// (small), or copied by UCX. It returns the bytes committed, or
// errBackedUp (gate: checked first) when the peer must drain first. dl is
// the Write's deadline. Called with c.wmu held.
func (c *Conn) sendChunk(sp SendPath, frame int, small, gate bool, p []byte, dl Deadline) (sent int, err error) {
	c.dataHdr = stream.Header{Kind: stream.KindData, ConnID: c.remoteID}.Bytes()
	hb := c.dataHdr[:]
	zeroCopy := sp.ZeroCopy && len(p) >= ZeroCopyMin
	if small && !zeroCopy {
		if sent, done, err := c.writeSmall(sp, hb, p, frame, gate); done {
			return sent, err
		}
	} else if gate && c.backedUp(sp, small, c.backlog()) {
		return 0, errBackedUp
	}
	if zeroCopy {
		sent, err = c.sendZeroCopy(hb, p, frame, dl)
		c.framesSent(sent, frame)
		return sent, err
	}
	peer := c.peer()
	sent, pending, err := peer.send(engine.Frames{Header: hb, SeqOff: stream.SeqOffset, LenOff: stream.LengthOffset,
		Seq: c.seq, Data: p, Frame: frame})
	if pending {
		// UCX holds copies it could not send yet: count them against
		// the peer's bound (sends done inline cost nothing there).
		peer.unflushed.Add(int64(sent))
	}
	c.framesSent(sent, frame)
	return sent, err
}

// framesSent accounts for sent bytes that went out as frames of at most
// frame bytes: sequence numbers and counters. Called with c.wmu held.
func (c *Conn) framesSent(sent, frame int) {
	frames := (sent + frame - 1) / frame
	c.seq += uint64(frames)
	c.t.stats.framesOut.Add(uint64(frames))
	c.cnt.framesOut.Add(uint64(frames))
}

// peerBufferMax bounds what UCX holds in C memory for sends it could not
// start (a full socket or FIFO, a peer that stopped progressing): once the
// engine holds that much, a writer whose peer has had a quarter of it
// pending since its last flush waits for a flush of that peer first. The
// receive windows bound each conn; this bounds a peer's conns together,
// without slowing writers to peers that drain.
const peerBufferMax = 64 << 20

// shmSmallBacklog bounds, over shared memory, what UCX holds for a peer in
// sends it could not start (its FIFO full) before a small write waits for
// them (drainPeer), as a write to a full socket buffer waits. Without it a
// receiver slower than its sender (16 conns of 4 KiB writes into one
// process) let UCX queue up to a receive window per conn, in C buffers
// that are cold by the time they are filled: with it, 16 × 4 KiB over
// sm runs at 2.9–3.5 GB/s where it ran at 1.9–2.5 on the same machine. Over tcp the socket buffer is the backlog, and the same bound
// cost a fifth of that row; large writes have peerBufferMax.
const shmSmallBacklog = 1 << 20

// tcpBacklog bounds, over tcp, what UCX holds for a peer in sends it could
// not start (the socket buffer full) before a write waits for them
// (drainPeer), as a write to a full socket waits. The socket buffer (up to
// 4 MiB here) keeps the link busy meanwhile. Without it 16 conns of 1 MiB
// writes had UCX hold up to their receive windows (64 MiB) in C copies,
// and on a VM where a page fault costs 14 µs each fresh MiB of them cost
// 3.5 ms: that row runs at 0.35× Go's TCP with this bound and the buffer
// pool's, 0.15× without.
const tcpBacklog = 8 << 20

// processBacklog bounds what one worker's UCX holds in sends it could not
// start, to all its peers together (per worker, like everything a worker
// holds: Config.Workers multiplies it): once it holds that much, a write
// to a peer it holds any for waits for them (drainPeer). The bounds above
// are per peer, and 8 peers that grant a window and never drain held 8 of
// them (64 MiB over tcp, 128 MiB over shared memory); a peer that drains
// costs its writers only a flush while the worker is over it.
const processBacklog = 32 << 20

// backlog returns what UCX holds in sends to c's peer that it could not
// start.
func (c *Conn) backlog() (n uint64) {
	_ = c.peer().use(func(ep engine.EP) error {
		n = c.sh.eng.Backlog(ep)
		return nil
	})
	return n
}

// drainPeer waits until UCX has finished every send to c's peer (a flush),
// the Write's deadline channel dl closes (os.ErrDeadlineExceeded), c is
// closed (net.ErrClosed) or c fails or is reset meanwhile (the error its
// Writes now return): a flush of a peer that died may never finish.
// Called with c.wmu held.
func (c *Conn) drainPeer(dl <-chan struct{}) error {
	p := c.peer()
	err := p.flush(dl, c.closedCh, c.failedCh)
	switch {
	case err == nil:
		p.unflushed.Store(0)
	case err == errConnFailed:
		c.mu.Lock()
		err = c.werr
		c.mu.Unlock()
	case errors.As(err, new(timeoutError)):
		err = os.ErrDeadlineExceeded
	case err != net.ErrClosed && !errors.Is(err, syscall.ECONNRESET):
		err = withDetail(ErrReset, "%v", err)
	}
	return err
}

// sendZeroCopy sends p as frames straight from p's memory and waits until
// UCX is done with it: p is pinned meanwhile, and Write's caller may reuse
// it as soon as Write returns. If the send fails, none of p counts as
// sent: the conn is broken, and some of p may not have gone out. dl is
// the Write's deadline. Called with c.wmu held.
func (c *Conn) sendZeroCopy(hdr, p []byte, frame int, dl Deadline) (sent int, err error) {
	var pin runtime.Pinner
	pin.Pin(&p[0])
	defer pin.Unpin()
	token, done := c.t.ops.add()
	sent, wait, err := c.peer().send(engine.Frames{Header: hdr, SeqOff: stream.SeqOffset, LenOff: stream.LengthOffset,
		Seq: c.seq, Data: p, Frame: frame, ZeroCopy: true, Token: token})
	if !wait {
		c.t.ops.forget(token)
		return sent, err
	}
	if st := c.waitZeroCopy(done, dl); st != nil {
		if err == nil {
			err = st
		}
		return 0, err
	}
	return sent, err
}

// zeroCopyGrace is how long a zero-copy send may stay unfinished after the
// Write's deadline passed or the conn was closed before the peer is taken
// for hung.
const zeroCopyGrace = 2 * time.Second

// waitZeroCopy waits until UCX has finished a zero-copy send. UCX finishes
// an eager send without the peer application's help — only the peer's
// progress engine must drain the transport, and a dead peer fails the
// send — so the data is committed and the wait normally takes
// microseconds, whatever the deadline. But a peer process that is stopped
// or hung neither drains nor fails: once dl has passed (or the conn is
// closed) and zeroCopyGrace more has gone by, its endpoint is
// force-closed, which cancels the send (UCX never reads the writer's
// memory again) and resets every conn to that peer. A deadline moved on
// meanwhile (and not passed again) saves the peer: the wait goes on for
// it.
func (c *Conn) waitZeroCopy(done <-chan error, dl Deadline) error {
	for {
		select {
		case st := <-done:
			return st
		case <-dl.Wait():
		case <-c.closedCh:
		}
		grace := time.NewTimer(zeroCopyGrace)
		select {
		case st := <-done:
			grace.Stop()
			return st
		case <-grace.C:
		}
		if deadline.Closed(c.closedCh) || deadline.Closed(dl.Wait()) {
			c.t.stats.stalledPeers.Add(1)
			c.peer().fail(fmt.Sprintf("it did not drain a send for %v past the write deadline or close", zeroCopyGrace))
			return <-done
		}
	}
}
