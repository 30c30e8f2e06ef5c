//go:build linux

package kchan

import (
	"bytes"
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// pair listens on a fresh name and dials it; it returns both ends and
// the listener side's ends, one per channel.
func pair(t *testing.T) (dialed, accepted *Chan, ends chan End, s *Server) {
	t.Helper()
	name := Name([]byte(t.Name() + time.Now().String()))
	got := make(chan *Chan, 1)
	ends = make(chan End, 1)
	s, taken, err := Listen([]string{name}, Hello{Addrs: [][]byte{[]byte("listener")}, Release: "1.13.1", IPCNS: 7},
		func(ch *Chan) bool { got <- ch; return true }, func(_ *Chan, e End) { ends <- e })
	if err != nil || len(taken) != 0 {
		t.Fatal(err, taken)
	}
	t.Cleanup(s.Close)
	dialed, err = Dial(context.Background(), name, Hello{Addrs: [][]byte{[]byte("a1"), []byte("a2")}, Release: "1.18.1"})
	if err != nil {
		t.Fatal(err)
	}
	return dialed, <-got, ends, s
}

func TestHandshakeCredentialsAndEnds(t *testing.T) {
	d, a, ends, _ := pair(t)
	if d.Cred.PID != int32(os.Getpid()) || a.Cred.UID != uint32(os.Geteuid()) {
		t.Fatalf("creds %+v %+v", d.Cred, a.Cred)
	}
	if len(a.Hello.Addrs) != 2 || !bytes.Equal(a.Hello.Addrs[1], []byte("a2")) || a.Hello.Release != "1.18.1" {
		t.Fatalf("listener read %+v", a.Hello)
	}
	if string(d.Hello.Addrs[0]) != "listener" || d.Hello.IPCNS != 7 {
		t.Fatalf("dialer read %+v", d.Hello)
	}
	d.Close(false)
	if e := <-ends; e != Died {
		t.Fatalf("end %v, want Died", e)
	}
	d2, _, ends2, _ := pair(t)
	d2.Close(true)
	if e := <-ends2; e != Closed {
		t.Fatalf("end %v, want Closed", e)
	}
}

func TestSquattedName(t *testing.T) {
	name := Name([]byte(t.Name()))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, taken, err := Listen([]string{name}, Hello{}, func(*Chan) bool { return true }, func(*Chan, End) {})
	if err != nil || len(taken) != 1 {
		t.Fatalf("taken %v err %v", taken, err)
	}
	s.Close()
}

// A dialer that sends garbage, or nothing, is closed without an answer
// within the handshake bound.
func TestHostileDialer(t *testing.T) {
	name := Name([]byte(t.Name()))
	s, _, err := Listen([]string{name}, Hello{}, func(*Chan) bool { t.Error("admitted"); return true }, func(*Chan, End) {})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, junk := range [][]byte{{'U', 'X', 'K', 1, 0xff, 0xff, 0xff, 0xff}, []byte("GET / HTTP/1.0\r\n\r\n"), {'U', 'X', 'K', 1, 0, 0, 0, 3, 0, 9, 1}, nil} {
		c, err := net.Dial("unix", name)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(junk)
		c.SetReadDeadline(time.Now().Add(2 * HandshakeTimeout))
		var b [1]byte
		if n, err := c.Read(b[:]); n != 0 || err == nil || os.IsTimeout(err) {
			t.Fatalf("junk %x: read %d %v", junk, n, err)
		}
		c.Close()
	}
}

func FuzzParseHello(f *testing.F) {
	b, _ := Hello{Addrs: [][]byte{[]byte("x")}, Release: "1.13.1", IPCNS: 1}.Marshal()
	f.Add(b[8:])
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := ParseHello(body)
		if err != nil {
			return
		}
		out, err := h.Marshal()
		if err != nil || !bytes.Equal(out[8:], body) {
			t.Fatalf("round trip %x -> %x (%v)", body, out, err)
		}
	})
}
