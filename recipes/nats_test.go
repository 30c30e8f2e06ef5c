package recipes

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestNATS: an in-process nats-server with no TCP listener serves a ucxnet
// name through ServeNATS; nats.go clients dial it with SetCustomDialer and
// publish, subscribe and make requests.
func TestNATS(t *testing.T) {
	s, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready within 10 s")
	}
	p := newPair(t, nil)
	ln := p.listen(t)
	served := make(chan error, 1)
	go func() { served <- ServeNATS(ln, s) }()
	t.Cleanup(func() {
		ln.Close()
		if err := <-served; err != nil {
			t.Errorf("ServeNATS: %v", err)
		}
	})

	url := "nats://" + ln.Addr().String()
	connect := func() *nats.Conn {
		nc, err := nats.Connect(url, nats.SetCustomDialer(p.dialer), nats.Timeout(10*time.Second))
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	responder, requester := connect(), connect()
	if _, err := responder.Subscribe("echo", func(m *nats.Msg) { m.Respond(append([]byte("echo: "), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 512<<10)
	for i := range big {
		big[i] = byte(i)
	}
	for _, data := range [][]byte{[]byte("hello"), big} {
		m, err := requester.Request("echo", data, 10*time.Second)
		if err != nil {
			t.Fatalf("request of %d bytes: %v", len(data), err)
		}
		if want := append([]byte("echo: "), data...); string(m.Data) != string(want) {
			t.Fatalf("reply of %d bytes to %d bytes, want %d", len(m.Data), len(data), len(want))
		}
	}
	if n := s.NumClients(); n != 2 {
		t.Fatalf("nats-server has %d clients, want 2", n)
	}
}
