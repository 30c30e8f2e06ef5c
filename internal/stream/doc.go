// Package stream holds the wire format and the pure bookkeeping that
// ucxnet uses to carry a reliable, ordered byte stream (a net.Conn) over
// UCX active messages (AM).
//
// ucxnet splits a byte stream into frames. Each frame is a fixed
// HeaderLen (32) byte Header, sent as the AM user header, and an optional
// payload, sent as the AM data. UCX does not guarantee that active
// messages are delivered in the order they were sent, so the frames that
// make up the stream itself (KindData and KindFin) carry a per-direction
// sequence number; a Reassembler on the receiving side puts them back in
// order. Control frames (KindRst, KindWindow, KindPing) are unordered and
// designed to be idempotent or order-insensitive.
//
// A connection starts with a handshake: the dialer sends KindConnect with
// a Hello payload, and the listener answers KindAccept (with its own
// Hello) or KindRefuse (with a RefuseCode). Hello is TLV-encoded so that
// newer peers can add fields that older peers skip.
//
// Flow control is byte-based and uses absolute limits, in the style of
// golang.org/x/net/http2's flow.go: the receiver's RecvWindow decides when
// to advertise a new absolute receive limit (KindWindow, Aux = limit), and
// the sender's SendWindow only ever raises its limit, so window updates
// may be duplicated or reordered without harm.
//
// Nothing in this package performs I/O, starts goroutines or locks; the
// types are plain state machines meant to be guarded by the caller's
// connection lock. There is no cgo here.
package stream
