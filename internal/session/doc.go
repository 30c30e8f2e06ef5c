// Package session is ucxnet's conn core in pure Go: the Transport, its
// streams, listeners and dialer, the protocol they speak over the engines
// (internal/engine) and the kernel-TCP lane (internal/lane), and the
// owned types they are built from. Package ucxnet is the face that
// applications see: its Conn, Listener, ListenConfig, Dialer and
// Transport hold this package's and wrap errors in *net.OpError. Its data
// types (Config, Stats, ConnStats, Snapshot, Addr...) are its own,
// documented there; this package's have the same fields in the same
// order, and ucxnet converts between them. Its constants and error values
// are this package's under ucxnet's names.
//
// The session imports no cgo package: not the UCX binding (internal/cucx)
// nor the progress engine (internal/progress), and not ucxnet
// (internal/srcsize checks it). What it needs of UCX (starting the
// progress engine, reading the UCX library and packed worker addresses)
// the face hands NewTransport as a UCXBinding (ucx.go), as wireguard-go
// hands its device a conn.Bind; where the binding says this build has no
// UCX the transport runs the kernel-TCP lane alone (noucx.go). The
// platform packages it uses (internal/cloexec, smfifo, statsock,
// procstat, lane) are pure Go, with stubs off Linux.
//
// # Streams
//
// A Stream (stream.go) is a conn on either lane, chosen when it is dialed
// or accepted: a UCX stream (Conn: conn.go, write.go, recv.go,
// terminate.go) or a kernel-TCP one (LaneConn: tcpconn.go). Its methods
// are *net.TCPConn's, deadlines included, and return bare errors; the
// face wraps them. The split follows gVisor's gonet: a UCX stream does
// the protocol and blocks, its Read and Write waiting on its own
// condition, its deadline and its close, for two reasons:
//   - a blocked Read is woken once, by the frame that readies it; a
//     readiness channel would add a second wake-up per Read on the hot
//     path;
//   - a zero-copy Write lends the caller's memory to UCX until UCX
//     completes the send: only the stream knows when that is, so the wait
//     is its own. It outlasts the deadline (by up to a grace period, for a
//     hung peer), and a deadline moved on meanwhile counts: the stream
//     asks its deadline for the channel each time.
//
// Listener.AcceptStream and Dialer.DialStream return streams; their
// errors, ListenConfig.Listen's and Listener.Close's are bare too. The
// face checks the network name ("ucx", "tcp"...), which the session never
// sees. The session's tests reach streams through a test face
// (face_test.go) that does what ucxnet's does.
//
// # Who does what
//
//   - Transport (transport.go, stats.go): the listeners, the shards, the
//     conn table, and the public stats.
//   - shard (shard.go, dispatch.go, accept.go, admit.go, ingress.go,
//     coalesce.go, peer.go, kchan.go): one engine and what belongs to it,
//     its peers and the frames that arrive on it, driven by its engine
//     goroutine; its keepalive sweep (sweep.go).
//   - peer (peer.go): one endpoint, and what is sent through it.
//   - handshake (handshake.go, dial.go, resend.go): a conn's opening, both
//     ways; accept.go has the listener's side of it.
//   - lanePolicy (lane.go): which lane a dial takes; chans (kchan.go): the
//     kernel channels to Transports on this host.
//   - the owned types, one file each: a stream's State and how it ends
//     (EndPolicy); its receive side, Inbound; its open frame of corked
//     small writes, Cork; the frames before a dial's answer, Early; the
//     keepalive's judgement, Judge, and its shape, KeepAlive; how writes
//     go out, ChoosePath and SegLimits; a listener's streams waiting for
//     their dialer's proof, Unproven; and the bounds and pools: Bucket,
//     LogLimiter, BufPool.
package session

// Lock order and ownership of the session's state. A lock is taken only
// after those above it (indented under it) and never the other way:
//
//	Conn.wmu      serializes writers and the FIN after them; seq
//	  Transport.mu  RW: the conn table, the accepted conns' CONNECTs
//	                (accepted, lingering, handshake.connect), the
//	                listeners, closed, every shard's peer tables and
//	                admission state, and a peer's conns, idleSince,
//	                hadConns, ka, dialed, madeBy and madeAt;
//	                Conn.keepAlive once in the table
//	    shard.connsMu  the shard's own index of the table (conns),
//	                  which its engine goroutine reads a frame's conn in
//	    Conn.mu       state (a State), in (an Inbound), swin, rerr, werr,
//	                  dErr, linger, the waiter counts and condition
//	                  channels
//	      Listener.mu   pendingAuth (an Unproven), queue admission, closed
//	      Conn.out      the open frame of corked writes (Cork's mutex)
//	  peer.epMu     RW: the endpoint in use (shared) or closing; gone
//	    the engine's worker (Acquire to GiveBack)
//	      outQueue.mu   the shard's queued peers, peer.outQ, failed
//	      Conn.out      (never under outQueue.mu, nor it under this)
//	Leaves, taken last: BufPool's and LogLimiter's mutexes, opTable.mu,
//	chans.mu (the kernel channels' links and dials), goneQueue.mu (a
//	shard's peers whose process exited), tcpSide.mu (a listener's
//	kernel-TCP side), floodList.mu (ingress.go), handshakeBudget.mu
//	(hsbudget.go), peer.ingressMu, laneConns.mu, LaneConn.mu, a
//	Deadline's (its Wait, called under Conn.mu).
//
// Owned by a shard's engine goroutine (its HandleEvents and Ticks), read
// and written there alone: Conn.from, learnFrom, unboundProbed,
// handshake.early; peer.pongs; the shard's sweep. A peer's process exit
// reaches it through the shard's goneQueue and a Writable event
// (kchan.go), never from the channel's goroutine directly. Atomics, each
// written by one side and read by any: peer.lastRecv, lastPing, rttProbe,
// rtt, closing, unflushed, info, sp, from (written under Transport.mu);
// Cork's failed flag; outQueue.queued, fresh; Conn.peerAt (written under
// both Transport.mu and Conn.mu: a dial moved to the worker its ACCEPT
// names, or to a new endpoint).
//
// Set once before the conn enters the conn table, then read-only: Conn.t,
// sh, laddr, dialed, handshake.workers; Conn.keepAlive, then under
// Transport.mu (SetKeepAliveConfig).
//
// The rules are checked at run time when UCXNET_DEBUG_OWNERS=1, and in
// this package's tests (owner.go): the functions that touch what a
// shard's engine goroutine owns check that they run inside that shard's
// HandleEvents, on the goroutine running it (the engine's loop, or its
// Close once the loop has stopped; one at a time), and each ...Locked
// function checks that its lock is held. A broken rule panics, naming it.
