// Package session holds ucxnet's protocol state in pure Go: what a
// Transport keeps between its engines (internal/engine) and the face that
// applications see (the ucxnet package's Conn, Listener and Dialer). It
// imports engine, stream and the pure internal packages only: no cgo, no
// UCX, no platform code. Anything platform-specific (the descriptor sweep,
// the shared-memory FIFO watcher, the stats socket, process lookups, the
// UCX engine's construction) stays outside; ucxnet hands in what the
// session needs of it as function values or small interfaces.
//
// # The face and the session
//
// The split follows gVisor's gonet, whose TCPConn is a thin blocking face
// over an endpoint that does the protocol. The session's streams are to
// do the protocol and block: a stream's Read and Write wait on its own
// condition, on a cancel channel the face passes in (a deadline's channel)
// and on the stream's close, and return bare errors; the face owns
// deadlines and wraps errors in *net.OpError. A stream blocks itself, rather than
// offering non-blocking calls and readiness channels, for two reasons:
//   - a blocked Read is woken once, by the frame that readies it; a
//     readiness channel would add a second wake-up per Read on the hot
//     path;
//   - a zero-copy Write lends the caller's memory to UCX until UCX
//     completes the send: only the session knows when that is, so the
//     wait for it belongs to the session, not to the face.
//
// The conn core (the conn's Read, Write and state machine, the conn and
// peer tables, dispatch and the handshake) is still in package ucxnet,
// built from the owned types here; it moves here as that stream.
//
// # What is here
//
// One file per owned type:
//   - a stream's State (its phase and which halves are shut) and how it
//     ends (EndPolicy: what the cause owes the peer); its receive
//     side, Inbound (reassembly, the receive window, the data not yet
//     read); its open frame of corked small writes, Cork; the frames that
//     come before a dial's answer, Early;
//   - the keepalive's judgement of a peer, Judge;
//   - how writes go out on an endpoint, ChoosePath, and the largest frames
//     a peer takes per path, SegLimits;
//   - a listener's streams waiting for their dialer's proof, Unproven;
//   - the bounds and pools: Bucket (rate limits), LogLimiter (the log
//     records a peer's input causes) and BufPool (recycled buffers).
package session

// Lock order and ownership of the session's state, which the ucxnet
// package holds until it moves here. A lock is taken only after those
// above it (indented under it) and never the other way:
//
//	Conn.wmu      serializes writers and the FIN after them; seq
//	  Transport.mu  RW: the conn table, the listeners, closed, every
//	                shard's peer tables and admission state, and a peer's
//	                conns, from, proc, idleSince, hadConns, ka, dialed,
//	                madeBy and madeAt
//	    Conn.mu       state (a State), in (an Inbound), swin, rerr, werr,
//	                  dErr, linger, the waiter counts and condition
//	                  channels
//	      Listener.mu   pendingAuth (an Unproven), queue admission, closed
//	      Conn.out      the open frame of corked writes (Cork's mutex)
//	  peer.epMu     RW: the endpoint in use (shared) or closing; gone
//	    the engine's worker (Acquire to GiveBack)
//	      outQueue.mu   the shard's queued peers, peer.outQ, failed
//	      Conn.out      (never under outQueue.mu, nor it under this)
//	Leaves, taken last: BufPool's and LogLimiter's mutexes, Transport.opMu.
//
// Owned by a shard's engine goroutine (its HandleEvents and Ticks), read
// and written there alone: Conn.from, learnFrom, peerProc, early (an
// Early); peer.pongs; shard.lastSweep. Atomics, each written by one
// side and read by any: peer.lastRecv, lastPing, rttProbe, rtt,
// stoppedAt, closing, unflushed, info, sp; Cork's failed flag;
// outQueue.queued, fresh.
//
// Set once before the conn enters the conn table, then read-only: Conn.t,
// sh, workers, dialed, keepAlive, laddr. Conn.peer is written under both
// Transport.mu and Conn.mu (a dialed conn moved to the worker its ACCEPT
// names) and read under either.
