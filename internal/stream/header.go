package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// HeaderLen is the size in bytes of an encoded Header (the AM user header).
const HeaderLen = 32

// Offsets in an encoded Header of the fields that differ between the frames
// of one write: the payload length (4 bytes) and the sequence number (8
// bytes), both little endian. Engines patch them per frame.
const (
	LengthOffset = 4
	SeqOffset    = 16
)

// Version is the wire protocol version written into every header.
const Version = 1

// MaxPayload is the absolute ceiling of one frame's payload in bytes,
// whatever the peers negotiate.
const MaxPayload = 16 << 20

// Kind identifies the type of a frame.
type Kind uint8

// Frame kinds.
const (
	// KindData is ordered (Seq); its payload is stream bytes and counts
	// against the receive window.
	KindData Kind = 1
	// KindFin is ordered (Seq) and has no payload: the sender will send no
	// more data (half-close).
	KindFin Kind = 2
	// KindRst is unordered with no payload: abort the connection; Aux holds
	// a RstCode.
	KindRst Kind = 3
	// KindWindow is unordered with no payload: Aux is the new absolute
	// receive limit, in bytes, that the sender of this frame grants.
	KindWindow Kind = 4
	// KindConnect is a handshake frame whose payload is a Hello; ConnID is 0.
	KindConnect Kind = 5
	// KindAccept is a handshake frame whose payload is a Hello; ConnID is the
	// dialer's conn id.
	KindAccept Kind = 6
	// KindRefuse is a handshake frame with no payload; ConnID is the dialer's
	// conn id and Aux holds a RefuseCode.
	KindRefuse Kind = 7
	// KindPing is unordered with no payload: the per-peer keepalive probe.
	// Aux is the sender's conn id, echoed back in the reply, which carries
	// FlagReply (a pong).
	KindPing Kind = 8
	// KindAuth is the pre-shared-key step of the handshake. From the dialer
	// (ConnID = the listener's conn id) its payload is a Hello whose MAC
	// answers the listener's challenge; the listener's reply (ConnID = the
	// dialer's conn id, FlagReply) is a Hello whose MAC is its own proof,
	// and confirms the conn.
	KindAuth Kind = 9
)

var kindNames = [...]string{
	KindData:    "DATA",
	KindFin:     "FIN",
	KindRst:     "RST",
	KindWindow:  "WINDOW",
	KindConnect: "CONNECT",
	KindAccept:  "ACCEPT",
	KindRefuse:  "REFUSE",
	KindPing:    "PING",
	KindAuth:    "AUTH",
}

// valid reports whether k is a kind this version understands.
func (k Kind) valid() bool { return k >= KindData && k <= KindAuth }

// String returns the kind's name, such as "DATA", or "Kind(N)" if unknown.
func (k Kind) String() string {
	if k.valid() {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// FlagReply marks a reply: a KindPing's answer (pong) and the listener's
// KindAuth.
const FlagReply uint16 = 1

// RstCode is the reason carried in the Aux field of a KindRst frame.
type RstCode uint64

// Reset reasons.
const (
	// RstAbort is a local abort, e.g. Close with unread data.
	RstAbort RstCode = 1
	// RstProtocol reports a protocol violation by the peer.
	RstProtocol RstCode = 2
	// RstWindow reports that the peer overran the receive window. Never
	// sent by this version (an overrun is reset with RstProtocol); kept so
	// that a receiver names it.
	RstWindow RstCode = 3
	// RstUnknownConn answers an ACCEPT that matches no dial of the
	// receiver's (other frames for a conn id that does not exist are
	// dropped).
	RstUnknownConn RstCode = 4
	// RstShutdown reports that the transport is closing.
	RstShutdown RstCode = 5
)

// String returns a short description of the reset reason.
func (c RstCode) String() string {
	switch c {
	case RstAbort:
		return "abort"
	case RstProtocol:
		return "protocol violation"
	case RstWindow:
		return "flow control window exceeded"
	case RstUnknownConn:
		return "unknown connection"
	case RstShutdown:
		return "transport shutdown"
	}
	return "RstCode(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// RefuseCode is the reason carried in the Aux field of a KindRefuse frame.
type RefuseCode uint64

// Refusal reasons.
const (
	// RefuseNoListener: nothing listens under the dialed name.
	RefuseNoListener RefuseCode = 1
	// RefuseBacklog: the listener's accept backlog is full.
	RefuseBacklog RefuseCode = 2
	// RefuseVersion: the listener does not speak the dialer's version.
	// Never sent by this version (frames of another version are dropped).
	RefuseVersion RefuseCode = 3
	// RefuseAuth: authentication failed.
	RefuseAuth RefuseCode = 4
	// RefuseBadHello: the CONNECT frame's Hello was malformed.
	RefuseBadHello RefuseCode = 5
)

// String returns a short description of the refusal reason.
func (c RefuseCode) String() string {
	switch c {
	case RefuseNoListener:
		return "no listener"
	case RefuseBacklog:
		return "backlog full"
	case RefuseVersion:
		return "version mismatch"
	case RefuseAuth:
		return "authentication failed"
	case RefuseBadHello:
		return "bad hello"
	}
	return "RefuseCode(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Header errors.
var (
	// ErrHeaderLength means the AM user header is not exactly HeaderLen bytes.
	ErrHeaderLength = errors.New("stream: bad header length")
	// ErrVersion means the header carries an unsupported protocol version.
	ErrVersion = errors.New("stream: unsupported protocol version")
	// ErrUnknownKind means the header carries a frame kind this version does
	// not know.
	ErrUnknownKind = errors.New("stream: unknown frame kind")
	// ErrLengthMismatch means the header's Length differs from the size of
	// the payload that arrived with it.
	ErrLengthMismatch = errors.New("stream: header length does not match payload")
	// ErrPayloadTooLarge means a payload exceeds the negotiated or absolute
	// limit for its kind.
	ErrPayloadTooLarge = errors.New("stream: payload too large")
	// ErrEmptyData means a KindData frame carries no payload.
	ErrEmptyData = errors.New("stream: empty data frame")
	// ErrUnexpectedPayload means a kind that takes no payload carries one.
	ErrUnexpectedPayload = errors.New("stream: unexpected payload")
	// ErrBadConnID means the ConnID is zero where it must be set, or set
	// where it must be zero (KindConnect).
	ErrBadConnID = errors.New("stream: bad conn id")
)

// Header is the decoded form of a frame's 32-byte header.
//
// Layout (little endian): [0]=Version [1]=Kind [2:4]=Flags
// [4:8]=Length (payload bytes) [8:16]=ConnID (the destination conn id at
// the receiver) [16:24]=Seq [24:32]=Aux.
type Header struct {
	Kind   Kind   // frame kind
	Flags  uint16 // kind-specific flags, e.g. FlagReply
	Length uint32 // payload length in bytes
	ConnID uint64 // destination conn id at the receiver (0 for KindConnect)
	Seq    uint64 // sequence number of ordered kinds (KindData, KindFin)
	Aux    uint64 // kind-specific value: window limit, RstCode, RefuseCode, PING sender's conn id
}

// Encode writes h, with the current Version, into b[:HeaderLen]. It panics
// if len(b) < HeaderLen.
func (h *Header) Encode(b []byte) {
	_ = b[HeaderLen-1] // bounds check; panics on a short buffer
	b[0] = Version
	b[1] = byte(h.Kind)
	binary.LittleEndian.PutUint16(b[2:4], h.Flags)
	binary.LittleEndian.PutUint32(b[LengthOffset:LengthOffset+4], h.Length)
	binary.LittleEndian.PutUint64(b[8:16], h.ConnID)
	binary.LittleEndian.PutUint64(b[SeqOffset:SeqOffset+8], h.Seq)
	binary.LittleEndian.PutUint64(b[24:32], h.Aux)
}

// Bytes returns the encoded header.
func (h Header) Bytes() [HeaderLen]byte {
	var b [HeaderLen]byte
	h.Encode(b[:])
	return b
}

// DecodeHeader parses an AM user header. b must be exactly HeaderLen bytes
// (ErrHeaderLength), carry Version (ErrVersion) and a known kind
// (ErrUnknownKind). It does not check the header against its payload; see
// Validate.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) != HeaderLen {
		return Header{}, ErrHeaderLength
	}
	if b[0] != Version {
		return Header{}, ErrVersion
	}
	k := Kind(b[1])
	if !k.valid() {
		return Header{}, ErrUnknownKind
	}
	return Header{
		Kind:   k,
		Flags:  binary.LittleEndian.Uint16(b[2:4]),
		Length: binary.LittleEndian.Uint32(b[LengthOffset : LengthOffset+4]),
		ConnID: binary.LittleEndian.Uint64(b[8:16]),
		Seq:    binary.LittleEndian.Uint64(b[SeqOffset : SeqOffset+8]),
		Aux:    binary.LittleEndian.Uint64(b[24:32]),
	}, nil
}

// Validate checks a decoded header against the payload that arrived with
// it (payloadLen bytes) and the largest data payload this side accepts
// (maxPayload; values <= 0 or above MaxPayload mean MaxPayload).
//
// Length must equal payloadLen (ErrLengthMismatch). KindData needs
// 1..maxPayload bytes (ErrEmptyData, ErrPayloadTooLarge); KindFin, KindRst,
// KindWindow, KindRefuse and KindPing take none (ErrUnexpectedPayload);
// KindConnect and KindAccept need a 1..MaxHelloLen byte Hello (ErrBadHello,
// ErrPayloadTooLarge); KindAuth (a Hello both ways, checked when decoded)
// takes at most MaxHelloLen bytes. KindConnect must have ConnID 0 and
// every other kind a non-zero ConnID (ErrBadConnID).
func (h Header) Validate(payloadLen int, maxPayload int) error {
	if payloadLen < 0 || uint64(h.Length) != uint64(payloadLen) {
		return ErrLengthMismatch
	}
	if maxPayload <= 0 || maxPayload > MaxPayload {
		maxPayload = MaxPayload
	}
	switch h.Kind {
	case KindData:
		if h.Length == 0 {
			return ErrEmptyData
		}
		if uint64(h.Length) > uint64(maxPayload) {
			return ErrPayloadTooLarge
		}
	case KindFin, KindRst, KindWindow, KindRefuse, KindPing:
		if h.Length != 0 {
			return ErrUnexpectedPayload
		}
	case KindConnect, KindAccept:
		if h.Length == 0 {
			return fmt.Errorf("%w: empty %v payload", ErrBadHello, h.Kind)
		}
		if h.Length > MaxHelloLen {
			return ErrPayloadTooLarge
		}
	case KindAuth:
		if h.Length > MaxHelloLen {
			return ErrPayloadTooLarge
		}
	default:
		return ErrUnknownKind
	}
	if (h.Kind == KindConnect) != (h.ConnID == 0) {
		return ErrBadConnID
	}
	return nil
}

// String formats the header for logs and debugging.
func (h Header) String() string {
	return fmt.Sprintf("%v conn=%d seq=%d len=%d aux=%d flags=%#x",
		h.Kind, h.ConnID, h.Seq, h.Length, h.Aux, h.Flags)
}
