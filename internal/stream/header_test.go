package stream

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

var allKinds = []Kind{KindData, KindFin, KindRst, KindWindow, KindConnect, KindAccept, KindRefuse, KindPing, KindAuth}

func TestHeaderRoundTrip(t *testing.T) {
	for _, k := range allKinds {
		for _, h := range []Header{
			{Kind: k},
			{Kind: k, Flags: FlagReply, Length: 100, ConnID: 7, Seq: 42, Aux: 9},
			{Kind: k, Flags: math.MaxUint16, Length: math.MaxUint32, ConnID: math.MaxUint64, Seq: math.MaxUint64, Aux: math.MaxUint64},
		} {
			b := h.Bytes()
			require.Equal(t, byte(Version), b[0])
			require.Equal(t, byte(k), b[1])
			got, err := DecodeHeader(b[:])
			require.NoError(t, err)
			require.Equal(t, h, got)

			buf := make([]byte, HeaderLen+5)
			h.Encode(buf)
			require.Equal(t, b[:], buf[:HeaderLen])
		}
	}
}

func TestHeaderLayout(t *testing.T) {
	h := Header{Kind: KindWindow, Flags: 0x0201, Length: 0x06050403, ConnID: 0x0e0d0c0b0a090807, Seq: 0x161514131211100f, Aux: 0x1e1d1c1b1a191817}
	b := h.Bytes()
	require.Equal(t, []byte{Version, byte(KindWindow)}, b[:2])
	// The field values are chosen so that, little endian, bytes 2..31 read
	// 0x01, 0x02, ..., 0x1e.
	for i := 2; i < HeaderLen; i++ {
		require.Equal(t, byte(i-1), b[i], "byte %d", i)
	}
}

func TestEncodeShortPanics(t *testing.T) {
	h := Header{Kind: KindData}
	require.Panics(t, func() { h.Encode(make([]byte, HeaderLen-1)) })
}

func TestDecodeHeaderErrors(t *testing.T) {
	good := Header{Kind: KindData, Length: 1, ConnID: 1}.Bytes()
	for _, n := range []int{0, 1, HeaderLen - 1, HeaderLen + 1, 64} {
		_, err := DecodeHeader(make([]byte, n))
		require.ErrorIs(t, err, ErrHeaderLength, "len %d", n)
	}
	for _, v := range []byte{0, 2, 255} {
		b := good
		b[0] = v
		_, err := DecodeHeader(b[:])
		require.ErrorIs(t, err, ErrVersion)
	}
	for _, k := range []byte{0, 10, 255} {
		b := good
		b[1] = k
		_, err := DecodeHeader(b[:])
		require.ErrorIs(t, err, ErrUnknownKind)
	}
}

func TestValidate(t *testing.T) {
	const maxP = 1024
	tests := []struct {
		name string
		h    Header
		n    int
		max  int
		err  error
	}{
		{"data ok", Header{Kind: KindData, Length: 10, ConnID: 1}, 10, maxP, nil},
		{"data at max", Header{Kind: KindData, Length: maxP, ConnID: 1}, maxP, maxP, nil},
		{"data over max", Header{Kind: KindData, Length: maxP + 1, ConnID: 1}, maxP + 1, maxP, ErrPayloadTooLarge},
		{"data at ceiling", Header{Kind: KindData, Length: MaxPayload, ConnID: 1}, MaxPayload, 0, nil},
		{"data over ceiling", Header{Kind: KindData, Length: MaxPayload + 1, ConnID: 1}, MaxPayload + 1, 1 << 30, ErrPayloadTooLarge},
		{"data empty", Header{Kind: KindData, ConnID: 1}, 0, maxP, ErrEmptyData},
		{"data no conn", Header{Kind: KindData, Length: 1}, 1, maxP, ErrBadConnID},
		{"length mismatch", Header{Kind: KindData, Length: 10, ConnID: 1}, 9, maxP, ErrLengthMismatch},
		{"negative length", Header{Kind: KindFin, ConnID: 1}, -1, maxP, ErrLengthMismatch},
		{"fin ok", Header{Kind: KindFin, ConnID: 1, Seq: 5}, 0, maxP, nil},
		{"fin payload", Header{Kind: KindFin, Length: 1, ConnID: 1}, 1, maxP, ErrUnexpectedPayload},
		{"rst ok", Header{Kind: KindRst, ConnID: 1, Aux: uint64(RstAbort)}, 0, maxP, nil},
		{"rst payload", Header{Kind: KindRst, Length: 3, ConnID: 1}, 3, maxP, ErrUnexpectedPayload},
		{"window ok", Header{Kind: KindWindow, ConnID: 2, Aux: 1 << 40}, 0, maxP, nil},
		{"window payload", Header{Kind: KindWindow, Length: 8, ConnID: 2}, 8, maxP, ErrUnexpectedPayload},
		{"window no conn", Header{Kind: KindWindow}, 0, maxP, ErrBadConnID},
		{"refuse ok", Header{Kind: KindRefuse, ConnID: 3, Aux: uint64(RefuseBacklog)}, 0, maxP, nil},
		{"refuse payload", Header{Kind: KindRefuse, Length: 1, ConnID: 3}, 1, maxP, ErrUnexpectedPayload},
		{"refuse no conn", Header{Kind: KindRefuse}, 0, maxP, ErrBadConnID},
		{"ping ok", Header{Kind: KindPing, Flags: FlagReply, ConnID: 3}, 0, maxP, nil},
		{"ping payload", Header{Kind: KindPing, Length: 1, ConnID: 3}, 1, maxP, ErrUnexpectedPayload},
		{"connect ok", Header{Kind: KindConnect, Length: 40}, 40, maxP, nil},
		{"connect hello larger than data max", Header{Kind: KindConnect, Length: MaxHelloLen}, MaxHelloLen, 16, nil},
		{"connect conn id", Header{Kind: KindConnect, Length: 40, ConnID: 1}, 40, maxP, ErrBadConnID},
		{"connect empty", Header{Kind: KindConnect}, 0, maxP, ErrBadHello},
		{"connect too big", Header{Kind: KindConnect, Length: MaxHelloLen + 1}, MaxHelloLen + 1, maxP, ErrPayloadTooLarge},
		{"accept ok", Header{Kind: KindAccept, Length: 40, ConnID: 9}, 40, maxP, nil},
		{"accept no conn", Header{Kind: KindAccept, Length: 40}, 40, maxP, ErrBadConnID},
		{"accept empty", Header{Kind: KindAccept, ConnID: 9}, 0, maxP, ErrBadHello},
		{"unknown kind", Header{Kind: 99, ConnID: 9}, 0, maxP, ErrUnknownKind},
		{"auth ok", Header{Kind: KindAuth, Length: 40, ConnID: 9}, 40, maxP, nil},
		{"auth reply ok", Header{Kind: KindAuth, Flags: FlagReply, ConnID: 9}, 0, maxP, nil},
		{"auth no conn", Header{Kind: KindAuth, Length: 40}, 40, maxP, ErrBadConnID},
		{"auth too large", Header{Kind: KindAuth, Length: MaxHelloLen + 1, ConnID: 9}, MaxHelloLen + 1, maxP, ErrPayloadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Validate(tt.n, tt.max)
			if tt.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.err)
			}
		})
	}
}

func TestStrings(t *testing.T) {
	names := []string{"DATA", "FIN", "RST", "WINDOW", "CONNECT", "ACCEPT", "REFUSE", "PING", "AUTH"}
	for i, k := range allKinds {
		require.Equal(t, names[i], k.String())
	}
	require.Equal(t, "Kind(0)", Kind(0).String())
	require.Equal(t, "Kind(10)", Kind(10).String())
	require.Equal(t, "AUTH", KindAuth.String())
	require.Equal(t, "abort", RstAbort.String())
	require.Equal(t, "transport shutdown", RstShutdown.String())
	require.Equal(t, "RstCode(77)", RstCode(77).String())
	require.Equal(t, "no listener", RefuseNoListener.String())
	require.Equal(t, "bad hello", RefuseBadHello.String())
	require.Equal(t, "RefuseCode(0)", RefuseCode(0).String())
	for c := RstAbort; c <= RstShutdown; c++ {
		require.NotContains(t, c.String(), "RstCode")
	}
	for c := RefuseNoListener; c <= RefuseBadHello; c++ {
		require.NotContains(t, c.String(), "RefuseCode")
	}
	h := Header{Kind: KindData, Length: 5, ConnID: 3, Seq: 8, Aux: 1, Flags: 1}
	require.Equal(t, "DATA conn=3 seq=8 len=5 aux=1 flags=0x1", h.String())
}

// FuzzDecodeHeader checks that decoding never panics and that a decoded
// header re-encodes to exactly the input.
func FuzzDecodeHeader(f *testing.F) {
	for _, k := range allKinds {
		b := Header{Kind: k, Length: 3, ConnID: 5, Seq: 7, Aux: 11}.Bytes()
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := DecodeHeader(in)
		if err != nil {
			return
		}
		out := h.Bytes()
		if !bytes.Equal(in, out[:]) {
			t.Fatalf("round trip: in %x out %x", in, out)
		}
		_ = h.Validate(int(h.Length), MaxPayload)
		_ = h.String()
	})
}
