package stream

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func fullHello() Hello {
	return Hello{
		ConnID:     0x0102030405060708,
		EagerMax:   64 << 10,
		Window:     1 << 20,
		Name:       "svc",
		LocalName:  "dialer-1",
		WorkerAddr: bytes.Repeat([]byte{0xab}, 300),
		Nonce:      []byte("nonce"),
		MAC:        []byte("mac"),
		ShmFrame:   32 << 10,
		TCPFrame:   1 << 20,
		UCX:        "1.18.1",
		Proc:       ProcID{PID: 4242, Start: 123456, PidNS: 4026531836, Boot: [16]byte{1, 2, 3, 15: 16}},
		Features:   FeatureWorkers | 1<<31,
	}
}

func tlv(typ byte, v []byte) []byte {
	return appendTLV(nil, typ, v)
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// minimal returns the encoding of the three mandatory fields.
func minimal() []byte {
	b := tlv(tlvConnID, u64(1))
	b = append(b, tlv(tlvEagerMax, u32(2))...)
	return append(b, tlv(tlvWindow, u32(3))...)
}

// A Hello may not grant a window beyond MaxWindow (4 GiB fitted the field).
func TestHelloWindowBound(t *testing.T) {
	h := Hello{ConnID: 1, EagerMax: 1, Window: MaxWindow + 1}
	_, err := h.MarshalBinary()
	require.ErrorIs(t, err, ErrBadHello)
	b := tlv(tlvConnID, u64(1))
	b = append(b, tlv(tlvEagerMax, u32(2))...)
	b = append(b, tlv(tlvWindow, u32(^uint32(0)))...)
	var got Hello
	require.ErrorIs(t, got.UnmarshalBinary(b), ErrBadHello)
}

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []Hello{
		fullHello(),
		{ConnID: 1, EagerMax: 1, Window: 1},
		{
			ConnID: ^uint64(0), EagerMax: ^uint32(0), Window: MaxWindow,
			Name: strings.Repeat("n", 1024), LocalName: strings.Repeat("l", 1024),
			WorkerAddr: make([]byte, 8192), Nonce: make([]byte, 64), MAC: make([]byte, 64),
		},
	} {
		b, err := h.MarshalBinary()
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), MaxHelloLen)
		var got Hello
		require.NoError(t, got.UnmarshalBinary(b))
		require.Equal(t, h, got)
	}
}

func TestHelloMarshalErrors(t *testing.T) {
	for name, mod := range map[string]func(*Hello){
		"zero conn":  func(h *Hello) { h.ConnID = 0 },
		"zero eager": func(h *Hello) { h.EagerMax = 0 },
		"zero win":   func(h *Hello) { h.Window = 0 },
		"name":       func(h *Hello) { h.Name = strings.Repeat("x", 1025) },
		"local":      func(h *Hello) { h.LocalName = strings.Repeat("x", 1025) },
		"addr":       func(h *Hello) { h.WorkerAddr = make([]byte, 8193) },
		"nonce":      func(h *Hello) { h.Nonce = make([]byte, 65) },
		"mac":        func(h *Hello) { h.MAC = make([]byte, 65) },
		"proc pid 0": func(h *Hello) { h.Proc.PID = 0 },
	} {
		h := fullHello()
		mod(&h)
		_, err := h.MarshalBinary()
		require.ErrorIs(t, err, ErrBadHello, name)
	}
}

func TestHelloUnmarshalErrors(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	pidZeroProc := make([]byte, procLen)
	pidZeroProc[4] = 7 // a start time, but pid 0
	for name, b := range map[string][]byte{
		"empty":            nil,
		"truncated header": cat(minimal(), []byte{tlvName, 1}),
		"truncated value":  cat(minimal(), []byte{tlvName, 5, 0, 'a', 'b'}),
		"truncated fixed":  minimal()[:10],
		"missing conn":     cat(tlv(tlvEagerMax, u32(2)), tlv(tlvWindow, u32(3))),
		"missing eager":    cat(tlv(tlvConnID, u64(1)), tlv(tlvWindow, u32(3))),
		"missing window":   cat(tlv(tlvConnID, u64(1)), tlv(tlvEagerMax, u32(2))),
		"zero conn":        cat(tlv(tlvConnID, u64(0)), tlv(tlvEagerMax, u32(2)), tlv(tlvWindow, u32(3))),
		"zero eager":       cat(tlv(tlvConnID, u64(1)), tlv(tlvEagerMax, u32(0)), tlv(tlvWindow, u32(3))),
		"zero window":      cat(tlv(tlvConnID, u64(1)), tlv(tlvEagerMax, u32(2)), tlv(tlvWindow, u32(0))),
		"short conn":       cat(tlv(tlvConnID, u32(1)), tlv(tlvEagerMax, u32(2)), tlv(tlvWindow, u32(3))),
		"long eager":       cat(tlv(tlvConnID, u64(1)), tlv(tlvEagerMax, u64(2)), tlv(tlvWindow, u32(3))),
		"short window":     cat(tlv(tlvConnID, u64(1)), tlv(tlvEagerMax, u32(2)), tlv(tlvWindow, []byte{3})),
		"dup conn":         cat(minimal(), tlv(tlvConnID, u64(1))),
		"dup name":         cat(minimal(), tlv(tlvName, []byte("a")), tlv(tlvName, []byte("a"))),
		"dup mac":          cat(minimal(), tlv(tlvMAC, []byte("a")), tlv(tlvMAC, []byte("b"))),
		"long name":        cat(minimal(), tlv(tlvName, make([]byte, 1025))),
		"long local":       cat(minimal(), tlv(tlvLocalName, make([]byte, 1025))),
		"long addr":        cat(minimal(), tlv(tlvWorkerAddr, make([]byte, 8193))),
		"long nonce":       cat(minimal(), tlv(tlvNonce, make([]byte, 65))),
		"long mac":         cat(minimal(), tlv(tlvMAC, make([]byte, 65))),
		"too long":         cat(minimal(), tlv(200, make([]byte, MaxHelloLen))),
		"short proc":       cat(minimal(), tlv(tlvProc, make([]byte, procLen-1))),
		"long proc":        cat(minimal(), tlv(tlvProc, make([]byte, procLen+1))),
		"proc pid 0":       cat(minimal(), tlv(tlvProc, pidZeroProc)),
		"short features":   cat(minimal(), tlv(tlvFeatures, []byte{1})),
		"dup features":     cat(minimal(), tlv(tlvFeatures, u32(1)), tlv(tlvFeatures, u32(1))),
	} {
		h := fullHello()
		err := h.UnmarshalBinary(b)
		require.ErrorIs(t, err, ErrBadHello, name)
		require.Equal(t, fullHello(), h, "%s: hello changed on error", name)
	}
}

func TestHelloUnknownTLVSkipped(t *testing.T) {
	b := bytes.Join([][]byte{
		tlv(0, []byte("zero")),
		minimal(),
		tlv(200, []byte("future field")),
		tlv(200, []byte("repeated unknown")),
		{255, 0, 0}, // empty unknown
		tlv(tlvName, []byte("svc")),
	}, nil)
	var h Hello
	require.NoError(t, h.UnmarshalBinary(b))
	require.Equal(t, Hello{ConnID: 1, EagerMax: 2, Window: 3, Name: "svc"}, h)
}

func TestHelloEmptyFieldIsNil(t *testing.T) {
	b := append(minimal(), tlvNonce, 0, 0) // present but empty
	var h Hello
	require.NoError(t, h.UnmarshalBinary(b))
	require.Nil(t, h.Nonce)
}

func TestHelloNoAliasing(t *testing.T) {
	in := fullHello()
	b, err := in.MarshalBinary()
	require.NoError(t, err)
	var h Hello
	require.NoError(t, h.UnmarshalBinary(b))
	for i := range b {
		b[i] = 0xff
	}
	require.Equal(t, fullHello(), h)
}

// FuzzHello checks that unmarshalling never panics and that anything it
// accepts survives a marshal/unmarshal round trip.
func FuzzHello(f *testing.F) {
	h := fullHello()
	b, _ := h.MarshalBinary()
	f.Add(b)
	f.Add(minimal())
	f.Fuzz(func(t *testing.T, in []byte) {
		var h1 Hello
		if err := h1.UnmarshalBinary(in); err != nil {
			return
		}
		b1, err := h1.MarshalBinary()
		if err != nil {
			t.Fatalf("marshal of accepted hello %+v: %v", h1, err)
		}
		var h2 Hello
		if err := h2.UnmarshalBinary(b1); err != nil {
			t.Fatalf("unmarshal of marshalled hello: %v", err)
		}
		require.Equal(t, h1, h2)
		b2, err := h2.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b1, b2)
	})
}

// The frame limits are optional: a Hello without them (an older peer)
// decodes with zeros, and they must be exactly four bytes.
func TestHelloFrameLimits(t *testing.T) {
	var h Hello
	require.NoError(t, h.UnmarshalBinary(minimal()))
	require.Zero(t, h.ShmFrame)
	require.Zero(t, h.TCPFrame)
	b := append(minimal(), tlv(tlvShmFrame, []byte{0, 0x80, 0, 0})...)
	require.NoError(t, h.UnmarshalBinary(b))
	require.Equal(t, uint32(32<<10), h.ShmFrame)
	require.ErrorIs(t, h.UnmarshalBinary(append(minimal(), tlv(tlvTCPFrame, []byte{1, 2})...)), ErrBadHello)
}
