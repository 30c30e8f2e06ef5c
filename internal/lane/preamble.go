package lane

// The kernel-TCP lane's preamble (docs/PROTOCOL.md, "Lanes"): each TCP
// connection starts with
//
//	dialer:   magic "UCXNTCP\x01", flags (1: PSK), 0, dialer id u64,
//	          name length u16, local name length u16, name, local name,
//	          [challenge: 64 bytes, with a PSK]
//	listener: magic, status, flags (1: PSK), listener id u64,
//	          [challenge, with a PSK and status 0]
//	with a PSK: dialer's proof (32 bytes); listener: status, [its proof]
//
// all integers little-endian.

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/ucxnet/ucxnet/internal/auth"
)

// Magic opens every preamble, both ways; its last byte is the preamble
// version.
const Magic = "UCXNTCP\x01"

// Preamble sizes.
const (
	HelloFixed = len(Magic) + 1 + 1 + 8 + 2 + 2 // the dialer's fixed part
	ReplyFixed = len(Magic) + 1 + 1 + 8         // the listener's fixed part
	// MaxPreamble is the most a dialer's preamble may hold.
	MaxPreamble = HelloFixed + 2*255 + auth.ChallengeLen
)

// The listener's status byte. A stranger is told one thing, StatusRefused,
// whether no listener of that name is here, the dialer's key setting is
// not the listener's, its proof failed, or its source failed too many
// proofs of late: the reply does not say which names exist or are keyed.
const (
	StatusOK          byte = 0
	StatusRefused     byte = 1
	StatusBacklogFull byte = 3 // the name and key setting matched; the accept queue is full
)

// Errors of a dialer's preamble that is not one.
var (
	ErrGarbage   = errors.New("not a ucxnet TCP preamble")
	ErrOversized = errors.New("preamble fields out of bounds")
)

// Hello is a dialer's preamble.
type Hello struct {
	PSK       bool   // the dialer proves a pre-shared key
	ID        uint64 // the dialer's conn id, not 0
	Name      string // the listener name dialed: printable ASCII, 1 to 255 bytes
	LocalName string // the dialer's name: printable ASCII, at most 255 bytes
	Challenge []byte // with PSK: auth.ChallengeLen bytes
}

// ReadHello reads and checks a dialer's preamble: ErrGarbage if it is
// not one (names not printable ASCII included: no control character or
// escape sequence reaches a RemoteAddr), ErrOversized if its fields are
// out of bounds (id 0 included); it reads at most MaxPreamble bytes.
func ReadHello(r io.Reader) (Hello, error) {
	var h Hello
	var fix [HelloFixed]byte
	if _, err := io.ReadFull(r, fix[:]); err != nil {
		return h, err
	}
	if string(fix[:len(Magic)]) != Magic {
		return h, ErrGarbage
	}
	b := fix[len(Magic):]
	flags := b[0]
	h.PSK = flags&1 != 0
	h.ID = binary.LittleEndian.Uint64(b[2:])
	nl, ll := int(binary.LittleEndian.Uint16(b[10:])), int(binary.LittleEndian.Uint16(b[12:]))
	if flags&^1 != 0 || b[1] != 0 || h.ID == 0 || nl == 0 || nl > 255 || ll > 255 {
		return h, ErrOversized
	}
	n := nl + ll
	if h.PSK {
		n += auth.ChallengeLen
	}
	rest := make([]byte, n)
	if _, err := io.ReadFull(r, rest); err != nil {
		return h, err
	}
	h.Name, h.LocalName = string(rest[:nl]), string(rest[nl:nl+ll])
	if !Printable(h.Name) || !Printable(h.LocalName) {
		return h, ErrGarbage
	}
	if h.PSK {
		h.Challenge = rest[nl+ll:]
	}
	return h, nil
}

// helloLen is the length of the dialer's hello whose fixed part b starts
// with; false if b holds less than the fixed part.
func helloLen(b []byte) (int, bool) {
	if len(b) < HelloFixed {
		return 0, false
	}
	b = b[len(Magic):]
	n := HelloFixed + int(binary.LittleEndian.Uint16(b[10:])) + int(binary.LittleEndian.Uint16(b[12:]))
	if b[0]&1 != 0 {
		n += auth.ChallengeLen
	}
	return n, true
}

// AppendHello appends a dialer's preamble; h's names must be as ReadHello
// takes them.
func AppendHello(b []byte, h Hello) []byte {
	b = append(b, Magic...)
	b = append(b, flag(h.PSK), 0)
	b = binary.LittleEndian.AppendUint64(b, h.ID)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.Name)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.LocalName)))
	return append(append(append(b, h.Name...), h.LocalName...), h.Challenge...)
}

// Reply is the fixed part of a listener's reply.
type Reply struct {
	Status byte
	PSK    bool   // the listener has a pre-shared key
	ID     uint64 // the listener's conn id
}

// AppendReply appends a listener's reply, with its challenge (a PSK and
// StatusOK) after the fixed part.
func AppendReply(b []byte, r Reply, challenge []byte) []byte {
	b = append(b, Magic...)
	b = append(b, r.Status, flag(r.PSK))
	b = binary.LittleEndian.AppendUint64(b, r.ID)
	return append(b, challenge...)
}

// ParseReply reads the fixed part of a listener's reply; ok is false if it
// does not start with Magic, or says OK with id 0.
func ParseReply(b [ReplyFixed]byte) (r Reply, ok bool) {
	if string(b[:len(Magic)]) != Magic {
		return r, false
	}
	b2 := b[len(Magic):]
	r = Reply{Status: b2[0], PSK: b2[1]&1 != 0, ID: binary.LittleEndian.Uint64(b2[2:])}
	return r, r.Status != StatusOK || r.ID != 0
}

// Printable reports whether s is printable ASCII without spaces, as a
// preamble's names are.
func Printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}
