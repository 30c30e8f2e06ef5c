package main

// Cat-to-cat records: how two "ucxnet cat" processes end a conn without
// waiting for each other to exit.
//
// A plain cat cannot tell when its peer has received everything: ucxnet
// does not order the failure of an exiting peer after that peer's last
// frames (docs/PROTOCOL.md, "Peer failure"), so each side waits for the other to go
// (--linger), and two cats wait for each other. A "cat -l" therefore also
// listens under a second, private name that it publishes in its registry
// entry (metaCatRecords); a cat that finds it there dials that name, and
// over that conn both sides frame their bytes as records:
//
//	'D' len:uint32 (big endian, 1..maxCatRecord) payload   stdin data
//	'E'                                                    end of stdin
//	'A'                                                    the peer's 'E' was read: all its data is out
//
// A side is done when it has read the peer's 'E' (it has all the peer's
// data) and the peer's 'A' (the peer has all of its data); then it closes
// and exits at once. Its own 'A' went out when it read the peer's 'E'; if
// the exit overtakes it, the peer ends on the conn's end or failure having
// read the 'E', and falls back to waiting for this process to go, which it
// already has. Anyone else dials the public name and gets plain bytes.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// metaCatRecords is the registry meta key under which "cat -l" publishes
// the name that speaks cat records.
const metaCatRecords = "ucxnet-cat"

// maxCatRecord bounds a 'D' record's payload; a longer one is a protocol
// error.
const maxCatRecord = 64 << 10

const (
	recData = 'D'
	recEnd  = 'E'
	recAck  = 'A'
)

// errCatRecord is a malformed record from the peer.
var errCatRecord = errors.New("malformed cat record from the peer")

// recordConn frames writes to a conn as cat records; it is safe for the
// stdin copier and the reader (which sends 'A') to use at once.
type recordConn struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (w *recordConn) send(kind byte, p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf[:0], kind)
	if kind == recData {
		w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(p)))
		w.buf = append(w.buf, p...)
	}
	_, err := w.w.Write(w.buf)
	return err
}

// sendRecords copies in to w as 'D' records, then sends 'E'. It returns
// the bytes sent.
func sendRecords(w *recordConn, in io.Reader) (int64, error) {
	buf := make([]byte, maxCatRecord)
	var n int64
	for {
		m, err := in.Read(buf)
		if m > 0 {
			if werr := w.send(recData, buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, w.send(recEnd, nil)
		}
		if err != nil {
			return n, err
		}
	}
}

// recvResult is how the peer's side of a records conn ended.
type recvResult struct {
	n     int64 // payload bytes written to out
	end   bool  // the peer's 'E' was read: all its data is in out
	acked bool  // the peer's 'A' was read: it has all of ours
	err   error // nil when both were read
}

// recvRecords reads records from r until it has read both the peer's 'E'
// and its 'A', writing 'D' payloads to out and answering 'E' with 'A'
// on w.
func recvRecords(r io.Reader, out io.Writer, w *recordConn) recvResult {
	br := bufio.NewReaderSize(r, maxCatRecord+5)
	var res recvResult
	for !res.end || !res.acked {
		kind, err := br.ReadByte()
		if err != nil {
			res.err = err
			return res
		}
		switch {
		case kind == recData && !res.end:
			var hdr [4]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				res.err = noEOF(err)
				return res
			}
			size := binary.BigEndian.Uint32(hdr[:])
			if size == 0 || size > maxCatRecord {
				res.err = fmt.Errorf("%w: data record of %d bytes", errCatRecord, size)
				return res
			}
			m, err := io.CopyN(out, br, int64(size))
			res.n += m
			if err != nil {
				res.err = noEOF(err)
				return res
			}
		case kind == recEnd && !res.end:
			res.end = true
			if err := w.send(recAck, nil); err != nil {
				res.err = err
				return res
			}
		case kind == recAck && !res.acked:
			res.acked = true
		default:
			res.err = fmt.Errorf("%w: kind %q", errCatRecord, kind)
			return res
		}
	}
	return res
}

// noEOF turns an EOF inside a record into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
