package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestCatRecordsRoundTrip sends stdin as records and reads them back: the
// payload arrives whole, the 'E' is answered with an 'A', and the reader
// ends once it has the peer's 'E' and 'A'.
func TestCatRecordsRoundTrip(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160 kB: several records
	var wire bytes.Buffer
	n, err := sendRecords(&recordConn{w: &wire}, bytes.NewReader(payload))
	if err != nil || n != int64(len(payload)) {
		t.Fatalf("sendRecords: %d bytes, %v; want %d, nil", n, err, len(payload))
	}
	wire.WriteByte(recAck) // the peer's acknowledgement of our 'E'
	var out, answers bytes.Buffer
	r := recvRecords(&wire, &out, &recordConn{w: &answers})
	if r.err != nil || !r.end || !r.acked || r.n != int64(len(payload)) {
		t.Fatalf("recvRecords = %+v; want all %d bytes, the end and the ack", r, len(payload))
	}
	if !bytes.Equal(out.Bytes(), payload) {
		t.Errorf("payload changed on the way: %d bytes out of %d", out.Len(), len(payload))
	}
	if answers.String() != string(rune(recAck)) {
		t.Errorf("answers %q, want one 'A' for the peer's 'E'", answers.String())
	}
}

// TestCatRecordsHostile feeds malformed records to the reader: each is an
// error (errCatRecord, or an unexpected EOF inside a record), none a panic
// or a wait.
func TestCatRecordsHostile(t *testing.T) {
	data := func(size uint32, body string) string {
		var h [5]byte
		h[0] = recData
		binary.BigEndian.PutUint32(h[1:], size)
		return string(h[:]) + body
	}
	for _, tc := range []struct {
		name, wire string
		want       error
	}{
		{"unknown kind", "X", errCatRecord},
		{"empty data record", data(0, ""), errCatRecord},
		{"oversized data record", data(maxCatRecord+1, ""), errCatRecord},
		{"data after the end", "E" + data(1, "x"), errCatRecord},
		{"second end", "EE", errCatRecord},
		{"second ack", "AA", errCatRecord},
		{"truncated header", "D\x00\x00", io.ErrUnexpectedEOF},
		{"truncated payload", data(10, "abc"), io.ErrUnexpectedEOF},
		{"end without ack", "E", io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := recvRecords(strings.NewReader(tc.wire), &out, &recordConn{w: io.Discard})
			if !errors.Is(r.err, tc.want) {
				t.Errorf("recvRecords(%q) = %+v; want error %v", tc.wire, r, tc.want)
			}
		})
	}
}
