// Package kchan is the kernel channel between two ucxnet Transports on
// one host: a unix socket in the abstract namespace through which each
// side learns, from the kernel, who the other is (SO_PEERCRED: pid, uid
// and gid as the kernel saw them at connect time) and when it is gone
// (the kernel closes a dead process's descriptors at exit, zombie
// included, so the other side reads EOF at once).
//
// A Transport listens on one name per worker address, Name(addr): a
// dialer that holds a worker address (from a registry entry, or an
// ACCEPT naming another worker) finds the channel with no protocol or
// registry change. Each name has its accept goroutine (a Transport runs
// a few workers), and each channel one blocked Read. Abstract names are scoped by network namespace, as
// TCP ports are: two network namespaces ("hosts") cannot reach each
// other's channels.
//
// Every byte on a channel is hostile: the handshake is one frame each way
// (Hello, length-bounded), under a deadline; after it a channel carries
// at most the one byte that says its sender is closing (Closing). A side
// that reads anything else ends the channel.
package kchan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Prefix starts every channel name ("@" marks the abstract namespace).
const Prefix = "@ucxnet/"

// Name is the channel name of the Transport with the worker address addr:
// the prefix and the first 16 bytes of addr's SHA-256, in hex.
func Name(addr []byte) string {
	sum := sha256.Sum256(addr)
	return Prefix + hex.EncodeToString(sum[:16])
}

// Bounds of a Hello.
const (
	MaxHello   = 64 << 10 // a Hello frame's body
	MaxAddrs   = 64       // worker addresses in one Hello
	MaxAddr    = 4096     // bytes of one worker address
	MaxRelease = 64       // bytes of the UCX release string
)

// magic starts a Hello frame: "UXK" and the channel's version, 1.
var magic = [4]byte{'U', 'X', 'K', 1}

// Closing is the byte a side sends on a channel before it closes it on
// purpose (Transport.Close): its EOF then says "closed", not "died".
const Closing = 'C'

// Hello is what each side tells the other on a channel.
type Hello struct {
	// Addrs are the sender's worker addresses, all of its Transport's.
	Addrs [][]byte
	// Release is the UCX library release the sender runs ("1.13.1").
	Release string
	// IPCNS is the inode of the sender's IPC namespace
	// (/proc/self/ns/ipc): shared memory works only within one.
	IPCNS uint64
}

// ErrHello reports a malformed Hello.
var ErrHello = errors.New("kchan: malformed hello")

// Marshal encodes h as a frame: the magic, the body's length (4 bytes,
// big-endian), then the body: the release (2-byte length, bytes), the
// IPC namespace (8 bytes), the count of addresses (2 bytes) and each
// address (2-byte length, bytes).
func (h Hello) Marshal() ([]byte, error) {
	if len(h.Release) > MaxRelease || len(h.Addrs) > MaxAddrs {
		return nil, ErrHello
	}
	b := make([]byte, 8, 64)
	copy(b, magic[:])
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.Release)))
	b = append(b, h.Release...)
	b = binary.BigEndian.AppendUint64(b, h.IPCNS)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.Addrs)))
	for _, a := range h.Addrs {
		if len(a) == 0 || len(a) > MaxAddr {
			return nil, ErrHello
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(a)))
		b = append(b, a...)
	}
	if len(b)-8 > MaxHello {
		return nil, ErrHello
	}
	binary.BigEndian.PutUint32(b[4:8], uint32(len(b)-8))
	return b, nil
}

// frameLen checks a frame's first 8 bytes and returns its body's length.
func frameLen(head []byte) (int, error) {
	if [4]byte(head[:4]) != magic {
		return 0, fmt.Errorf("%w: bad magic %x", ErrHello, head[:4])
	}
	n := binary.BigEndian.Uint32(head[4:8])
	if n > MaxHello {
		return 0, fmt.Errorf("%w: %d-byte body", ErrHello, n)
	}
	return int(n), nil
}

// ParseHello decodes a Hello frame's body. The addresses it returns are
// copies.
func ParseHello(body []byte) (Hello, error) {
	var h Hello
	r := reader{b: body}
	rel := r.bytes(int(r.u16()))
	if len(rel) > MaxRelease {
		return h, ErrHello
	}
	h.Release = string(rel)
	h.IPCNS = r.u64()
	n := int(r.u16())
	if n > MaxAddrs {
		return h, ErrHello
	}
	for range n {
		l := int(r.u16())
		if l == 0 || l > MaxAddr {
			return h, ErrHello
		}
		h.Addrs = append(h.Addrs, append([]byte(nil), r.bytes(l)...))
	}
	if r.bad || len(r.b) != 0 {
		return Hello{}, ErrHello
	}
	return h, nil
}

// reader reads big-endian fields off b; bad is set once one runs short.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u16() uint16 {
	if v := r.bytes(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.bytes(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
