// Package ucxnet provides net.Conn and net.Listener over UCX (openucx), so
// that unmodified Go code — net/http, gRPC, crypto/tls, io.Copy — runs over
// RDMA (InfiniBand/RoCE), over shared memory between processes on one
// host, and over TCP where nothing better exists.
//
// There is no socket listener. A Listener publishes its UCX worker's packed
// address under a name in a registry (by default a per-user directory; see
// package registry), and Dial resolves the name and connects to that
// worker. Conns to one remote worker share one UCX endpoint and are told
// apart by conn ids. A byte stream is split into eager active-message
// frames, carried with sequence numbers and reassembled in order; small
// writes that find the path to their peer backed up are coalesced into
// larger frames (as TCP's autocorking does). Each conn has a receive
// window, so a reader that stops reading bounds the memory held for it and
// blocks the writer.
//
//	ln, _ := ucxnet.Listen("ucx", "web")
//	go http.Serve(ln, handler)
//
//	var d ucxnet.Dialer
//	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
//	client.Get("http://web/")
//
// UCX is configured by the usual UCX_* environment variables (UCX_TLS=tcp,
// UCX_TLS=sm, ...). ucxnet changes five UCX defaults unless the
// environment sets them: UCX_MM_ERROR_HANDLING=y (shared memory with peer
// failure detection), UCX_KEEPALIVE_INTERVAL=1s, UCX_TCP_CONN_NB=y (UCX
// 1.13's tcp transport can abort on a blocking connect refused while it
// reconnects), and the shared-memory and TCP receive segment sizes (see
// EffectiveUCXDefaults). It also probes
// silent peers itself (Config.KeepAlive).
//
// A conn's LocalAddr and RemoteAddr are "name:id" (see Addr), which
// net.SplitHostPort splits into the end's name and conn id. Conn.Stats,
// Transport.Conns and Transport.Snapshot say what each conn is doing;
// every transport also serves its Snapshot to `ucxnet ls` on a private
// Unix socket (Config.StatsDir), PublishExpvar publishes them as expvar,
// and Config.Logger records the rare events (peer failures, refused
// handshakes, dropped frames) to a log/slog logger.
//
// The package is a thin face over the streams of ucxnet's conn core, an
// internal package that does the protocol and whose streams block and
// keep their deadlines: Conn, Listener, Dialer and Transport report
// *net.OpError, and the Listener keeps Accept's deadline. NewTransport
// hands that core the UCX progress engine.
package ucxnet
