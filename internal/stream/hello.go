package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxHelloLen is the largest encoded Hello accepted, in bytes.
const MaxHelloLen = 16 << 10

// Limits on the variable-length Hello fields, in bytes.
const (
	maxHelloName       = 1024
	maxHelloWorkerAddr = 8192
	maxHelloSecret     = 64
	maxHelloUCX        = 32
)

// ErrBadHello means a handshake payload is malformed or violates a limit.
// Errors from Hello methods wrap it with detail.
var ErrBadHello = errors.New("stream: bad hello")

// TLV types of the Hello encoding.
const (
	tlvConnID     = 1
	tlvEagerMax   = 2
	tlvWindow     = 3
	tlvName       = 4
	tlvLocalName  = 5
	tlvWorkerAddr = 6
	tlvNonce      = 7
	tlvMAC        = 8
	tlvShmFrame   = 9
	tlvTCPFrame   = 10
	tlvUCX        = 11
	tlvProc       = 12
	tlvFeatures   = 13
)

// Feature bits of Hello.Features.
const (
	// FeatureWorkers: the sender runs several UCX workers and can move a
	// conn to another one in the handshake. In a CONNECT it lets the
	// listener answer from any of its workers; in an ACCEPT it says that
	// WorkerAddr names the listener's worker that sent it, on which the
	// dialer continues the conn.
	FeatureWorkers uint32 = 1 << 0
)

// procLen is the size of an encoded ProcID.
const procLen = 4 + 8 + 8 + 16

// ProcID names the process that sent a Hello, on its host: information
// for the peer (and an operator), which a receiver decides nothing by. The
// zero ProcID says nothing.
type ProcID struct {
	PID   uint32   // its process id, in its pid namespace (non-zero)
	Start uint64   // its start time, clock ticks after boot (/proc/PID/stat field 22)
	PidNS uint64   // the inode of its pid namespace (/proc/self/ns/pid)
	Boot  [16]byte // its host's boot id (/proc/sys/kernel/random/boot_id)
}

// Hello is the handshake payload of KindConnect and KindAccept frames.
//
// It is encoded as a sequence of TLVs (1 byte type, 2 bytes little-endian
// length, value). Unknown types are skipped so that newer peers can add
// fields; empty optional fields are omitted.
type Hello struct {
	ConnID    uint64 // sender's own conn id (non-zero)
	EagerMax  uint32 // largest frame payload the sender accepts (>0)
	Window    uint32 // sender's initial receive window in bytes (>0)
	Name      string // CONNECT: the listener name dialed; ACCEPT: the listener's name (≤ 1024 bytes)
	LocalName string // a display name for the sender's end (≤ 1024 bytes)
	// WorkerAddr is, in a CONNECT, the dialer's packed UCX worker address;
	// in an ACCEPT with FeatureWorkers, the address of the listener's
	// worker that sent it (≤ 8192 bytes).
	WorkerAddr []byte
	Nonce      []byte // optional, ≤ 64 bytes (for a later PSK challenge)
	MAC        []byte // optional, ≤ 64 bytes
	// ShmFrame and TCPFrame, optional (0: not said), are the largest frame
	// payloads the sender receives as one UCX message over shared memory
	// and over TCP: what its receive segments hold. A peer must not send
	// larger frames over that transport — UCX 1.13 aborts the receiving
	// process on a message its segment cannot hold.
	ShmFrame uint32
	TCPFrame uint32
	// UCX, optional, is the release of the UCX library the sender runs
	// (e.g. "1.13.1", ≤ 32 bytes), so that a peer that cannot work with it
	// can say which two releases met.
	UCX string
	// Proc, optional, is the sender's process (see ProcID).
	Proc ProcID
	// Features, optional (0: none), is the set of Feature bits the sender
	// supports. A bit it does not know is ignored by the receiver.
	Features uint32
}

// check enforces the field rules shared by marshalling and unmarshalling.
func (h *Hello) check() error {
	switch {
	case h.ConnID == 0:
		return fmt.Errorf("%w: zero conn id", ErrBadHello)
	case h.EagerMax == 0:
		return fmt.Errorf("%w: zero eager max", ErrBadHello)
	case h.Window == 0:
		return fmt.Errorf("%w: zero window", ErrBadHello)
	case h.Window > MaxWindow:
		return fmt.Errorf("%w: window of %d bytes exceeds %d", ErrBadHello, h.Window, MaxWindow)
	case len(h.Name) > maxHelloName:
		return fmt.Errorf("%w: name is %d bytes", ErrBadHello, len(h.Name))
	case len(h.LocalName) > maxHelloName:
		return fmt.Errorf("%w: local name is %d bytes", ErrBadHello, len(h.LocalName))
	case len(h.WorkerAddr) > maxHelloWorkerAddr:
		return fmt.Errorf("%w: worker address is %d bytes", ErrBadHello, len(h.WorkerAddr))
	case len(h.Nonce) > maxHelloSecret:
		return fmt.Errorf("%w: nonce is %d bytes", ErrBadHello, len(h.Nonce))
	case len(h.MAC) > maxHelloSecret:
		return fmt.Errorf("%w: MAC is %d bytes", ErrBadHello, len(h.MAC))
	case len(h.UCX) > maxHelloUCX:
		return fmt.Errorf("%w: UCX release is %d bytes", ErrBadHello, len(h.UCX))
	case h.Proc != (ProcID{}) && h.Proc.PID == 0:
		return fmt.Errorf("%w: process identity with pid 0", ErrBadHello)
	}
	return nil
}

// MarshalBinary encodes h. It fails, wrapping ErrBadHello, if ConnID,
// EagerMax or Window is zero or a field exceeds its limit. The result is
// never longer than MaxHelloLen.
func (h *Hello) MarshalBinary() ([]byte, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	n := 6*3 + 8 + 5*4 + 3 + procLen
	for _, v := range [][]byte{[]byte(h.Name), []byte(h.LocalName), h.WorkerAddr, h.Nonce, h.MAC, []byte(h.UCX)} {
		if len(v) > 0 {
			n += 3 + len(v)
		}
	}
	b := make([]byte, 0, n)
	b = appendTLV(b, tlvConnID, binary.LittleEndian.AppendUint64(nil, h.ConnID))
	b = appendTLV(b, tlvEagerMax, binary.LittleEndian.AppendUint32(nil, h.EagerMax))
	b = appendTLV(b, tlvWindow, binary.LittleEndian.AppendUint32(nil, h.Window))
	b = appendTLV(b, tlvName, []byte(h.Name))
	b = appendTLV(b, tlvLocalName, []byte(h.LocalName))
	b = appendTLV(b, tlvWorkerAddr, h.WorkerAddr)
	b = appendTLV(b, tlvNonce, h.Nonce)
	b = appendTLV(b, tlvMAC, h.MAC)
	b = appendTLV(b, tlvShmFrame, appendNonZero32(h.ShmFrame))
	b = appendTLV(b, tlvTCPFrame, appendNonZero32(h.TCPFrame))
	b = appendTLV(b, tlvUCX, []byte(h.UCX))
	b = appendTLV(b, tlvProc, h.Proc.append(nil))
	b = appendTLV(b, tlvFeatures, appendNonZero32(h.Features))
	return b, nil
}

// append encodes id (PID u32, Start u64, PidNS u64 little-endian, then
// Boot), or nothing for the zero ProcID.
func (id ProcID) append(b []byte) []byte {
	if id == (ProcID{}) {
		return b
	}
	b = binary.LittleEndian.AppendUint32(b, id.PID)
	b = binary.LittleEndian.AppendUint64(b, id.Start)
	b = binary.LittleEndian.AppendUint64(b, id.PidNS)
	return append(b, id.Boot[:]...)
}

// appendNonZero32 encodes v, or nothing for 0 (an omitted field).
func appendNonZero32(v uint32) []byte {
	if v == 0 {
		return nil
	}
	return binary.LittleEndian.AppendUint32(nil, v)
}

// appendTLV appends one TLV; empty values are omitted.
func appendTLV(b []byte, typ byte, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, typ)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...)
}

// UnmarshalBinary decodes b into h. It fails, wrapping ErrBadHello, if b
// is longer than MaxHelloLen, truncated, repeats a known field, has a
// fixed-size field of the wrong size, exceeds a field limit or lacks
// ConnID, EagerMax or Window. Unknown TLV types are skipped. The decoded
// byte slices are copies and do not alias b. On error h is unchanged.
func (h *Hello) UnmarshalBinary(b []byte) error {
	if len(b) > MaxHelloLen {
		return fmt.Errorf("%w: %d bytes", ErrBadHello, len(b))
	}
	var out Hello
	var seen uint32
	for len(b) > 0 {
		if len(b) < 3 {
			return fmt.Errorf("%w: truncated TLV header", ErrBadHello)
		}
		typ, n := b[0], int(binary.LittleEndian.Uint16(b[1:3]))
		if len(b)-3 < n {
			return fmt.Errorf("%w: truncated TLV %d", ErrBadHello, typ)
		}
		v := b[3 : 3+n]
		b = b[3+n:]
		if typ < tlvConnID || typ > tlvFeatures {
			continue // unknown: skip
		}
		if seen&(1<<typ) != 0 {
			return fmt.Errorf("%w: duplicate TLV %d", ErrBadHello, typ)
		}
		seen |= 1 << typ
		if err := out.setField(typ, v); err != nil {
			return err
		}
	}
	if seen&(1<<tlvConnID|1<<tlvEagerMax|1<<tlvWindow) != 1<<tlvConnID|1<<tlvEagerMax|1<<tlvWindow {
		return fmt.Errorf("%w: missing conn id, eager max or window", ErrBadHello)
	}
	if err := out.check(); err != nil {
		return err
	}
	*h = out
	return nil
}

// setField stores one known TLV value; fixed-size fields must be exact.
func (h *Hello) setField(typ byte, v []byte) error {
	want := -1
	switch typ {
	case tlvConnID:
		want = 8
	case tlvEagerMax, tlvWindow, tlvShmFrame, tlvTCPFrame, tlvFeatures:
		want = 4
	case tlvProc:
		want = procLen
	}
	if want >= 0 && len(v) != want {
		return fmt.Errorf("%w: TLV %d is %d bytes, want %d", ErrBadHello, typ, len(v), want)
	}
	switch typ {
	case tlvConnID:
		h.ConnID = binary.LittleEndian.Uint64(v)
	case tlvEagerMax:
		h.EagerMax = binary.LittleEndian.Uint32(v)
	case tlvWindow:
		h.Window = binary.LittleEndian.Uint32(v)
	case tlvName:
		h.Name = string(v)
	case tlvLocalName:
		h.LocalName = string(v)
	case tlvWorkerAddr:
		h.WorkerAddr = clone(v)
	case tlvNonce:
		h.Nonce = clone(v)
	case tlvMAC:
		h.MAC = clone(v)
	case tlvShmFrame:
		h.ShmFrame = binary.LittleEndian.Uint32(v)
	case tlvTCPFrame:
		h.TCPFrame = binary.LittleEndian.Uint32(v)
	case tlvUCX:
		h.UCX = string(v)
	case tlvProc:
		h.Proc.PID = binary.LittleEndian.Uint32(v)
		h.Proc.Start = binary.LittleEndian.Uint64(v[4:])
		h.Proc.PidNS = binary.LittleEndian.Uint64(v[12:])
		copy(h.Proc.Boot[:], v[20:])
	case tlvFeatures:
		h.Features = binary.LittleEndian.Uint32(v)
	}
	return nil
}

// clone copies v, mapping empty to nil so that decoded Hellos compare equal
// whether an empty field was omitted or sent with length 0.
func clone(v []byte) []byte {
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}
