// Package session is ucxnet's conn core in pure Go: the Transport, its
// streams (Conn), listeners and dialer, the protocol they speak over the
// engines (internal/engine) and the kernel-TCP lane (internal/lane), and
// the owned types they are built from. Package ucxnet is the face that
// applications see: its Conn, Listener, ListenConfig, Dialer and
// Transport hold this package's and add what net.Conn and net.Listener
// promise (deadlines, *net.OpError). Its data types (Config, Stats,
// ConnStats, Snapshot, Addr...) are its own, documented there; this
// package's have the same fields in the same order, and ucxnet converts
// between them. Its constants and error values are this package's under
// ucxnet's names.
//
// The session imports no cgo package: not the UCX binding (internal/cucx)
// nor the progress engine (internal/progress), and not ucxnet
// (internal/srcsize checks it). What it needs of UCX, starting the
// progress engine and reading the UCX library and packed worker
// addresses, ucxnet hands in when it is initialised (SetUCX, ucx.go);
// without it the session runs no UCX (noucx.go), as a build without cgo
// does. The platform packages it uses (internal/cloexec, smfifo,
// statsock, procstat, lane) are pure Go, with stubs off Linux.
//
// # The face and the session
//
// The split follows gVisor's gonet, whose TCPConn is a thin blocking face
// over an endpoint that does the protocol. The session's streams do the
// protocol and block: a stream's Read and Write wait on its own
// condition, on the deadline the face passes in (Deadline) and on the
// stream's close, and return bare errors; the face owns
// deadlines and wraps errors in *net.OpError. A stream blocks itself,
// rather than offering non-blocking calls and readiness channels, for two
// reasons:
//   - a blocked Read is woken once, by the frame that readies it; a
//     readiness channel would add a second wake-up per Read on the hot
//     path;
//   - a zero-copy Write lends the caller's memory to UCX until UCX
//     completes the send: only the session knows when that is, so the
//     wait for it belongs to the session, not to the face. It outlasts
//     the deadline (by up to a grace period, for a hung peer), and a
//     deadline moved on meanwhile counts: so the stream asks the face's
//     deadline for its channel each time, rather than taking one channel
//     per call.
//
// The face calls a stream's Read(b, dl) and Write(b, dl) with its
// deadlines (internal/deadline), and Close, CloseWrite, SetLinger,
// Stats, Lane and Transports; on the kernel-TCP lane, whose conn has
// kernel deadlines, SetLaneDeadline, LaneReadFrom and LaneWriteTo
// (sendfile and splice) instead of the deadlines. The
// stream's errors are bare; ucxnet wraps them in *net.OpError with the
// stream's addresses. Listener.AcceptStream and Dialer.DialStream hand the
// face streams; their errors, ListenConfig.Listen's and Listener.Close's
// are bare too, and the face wraps them (listen, dial, accept, close) in
// *net.OpError with the name listened on or dialed. The face checks the
// network name ("ucx", "tcp"...), which the session never sees. The
// session's tests reach streams through a test face (face_test.go) that
// does what ucxnet's does.
//
// The conn core (the stream's Read, Write and state machine, the conn and
// peer tables, dispatch and the handshake) is here, built from the owned
// types below.
//
// # The owned types
//
// One file per owned type:
//   - a stream's State (its phase and which halves are shut) and how it
//     ends (EndPolicy: what the cause owes the peer); its receive
//     side, Inbound (reassembly, the receive window, the data not yet
//     read); its open frame of corked small writes, Cork; the frames that
//     come before a dial's answer, Early;
//   - the keepalive's judgement of a peer, Judge, and its shape,
//     KeepAlive (TCP's: idle, interval, count);
//   - how writes go out on an endpoint, ChoosePath, and the largest frames
//     a peer takes per path, SegLimits;
//   - a listener's streams waiting for their dialer's proof, Unproven;
//   - the bounds and pools: Bucket (rate limits), LogLimiter (the log
//     records a peer's input causes) and BufPool (recycled buffers).
package session

// Lock order and ownership of the session's state (Conn, Transport,
// Listener, peer and outQueue are this package's types). A lock is taken
// only after those above it (indented under it) and never the other way:
//
//	Conn.wmu      serializes writers and the FIN after them; seq
//	  Transport.mu  RW: the conn table, the accepted conns' CONNECTs
//	                (accepted, lingering, Conn.connect), the listeners,
//	                closed, every shard's peer tables and admission state,
//	                and a peer's conns, from, idleSince, hadConns, ka,
//	                dialed, madeBy and madeAt; Conn.keepAlive once in the
//	                table
//	    Conn.mu       state (a State), in (an Inbound), swin, rerr, werr,
//	                  dErr, linger, the waiter counts and condition
//	                  channels
//	      Listener.mu   pendingAuth (an Unproven), queue admission, closed
//	      Conn.out      the open frame of corked writes (Cork's mutex)
//	  peer.epMu     RW: the endpoint in use (shared) or closing; gone
//	    the engine's worker (Acquire to GiveBack)
//	      outQueue.mu   the shard's queued peers, peer.outQ, failed
//	      Conn.out      (never under outQueue.mu, nor it under this)
//	Leaves, taken last: BufPool's and LogLimiter's mutexes, Transport.opMu,
//	chans.mu (the kernel channels' links and dials, kchan.go),
//	goneQueue.mu (a shard's peers whose process exited, and its pass
//	count), tcpSide.mu (a listener's kernel-TCP side: failed key proofs
//	per source, Buckets), floodList.mu (worker addresses and endpoints
//	found flooding, ingress.go), handshakeBudget.mu (hsbudget.go),
//	peer.ingressMu (its ingress Bucket), the face's Deadline's (its Wait,
//	called under Conn.mu).
//
// Owned by a shard's engine goroutine (its HandleEvents and Ticks), read
// and written there alone: Conn.from, learnFrom, early (an Early);
// peer.pongs; shard.lastSweep. A peer's process exit reaches it through
// the shard's goneQueue and a Writable event (kchan.go), never from the
// channel's goroutine directly. Atomics, each written by one side and
// read by any: peer.lastRecv, lastPing, rttProbe, rtt, closing,
// unflushed, info, sp; Cork's failed flag; outQueue.queued, fresh.
//
// Set once before the conn enters the conn table, then read-only: Conn.t,
// sh, workers, dialed, laddr. Conn.keepAlive is set before the conn
// enters the conn table, then written and read under Transport.mu
// (SetKeepAliveConfig). Conn.peerAt is written under both Transport.mu and
// Conn.mu (a dialed conn moved to the worker its ACCEPT names, or to a
// new endpoint by refreshDial) and read by anyone: an atomic pointer.
//
// The rules are checked at run time when UCXNET_DEBUG_OWNERS=1, and in
// this package's tests (owner.go): the functions that touch what a
// shard's engine goroutine owns check that they run inside that shard's
// HandleEvents, on the goroutine running it (the engine's loop, or its
// Close once the loop has stopped; one at a time), and each ...Locked
// function checks that its lock is held. A broken rule panics, naming it.
