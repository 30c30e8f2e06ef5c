package recipes

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestHTTP: net/http serves a ucxnet listener as it is, a client dials
// through a ucxnet.Dialer given to its Transport, and the handler splits
// the request's RemoteAddr with net.SplitHostPort.
func TestHTTP(t *testing.T) {
	p := newPair(t, nil)
	ln := p.listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Middleware that logs client addresses splits them: the host is
		// the dialing transport's name.
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%s %s %s %x", host, r.Method, r.URL.Path, sha256.Sum256(b))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// The recipe: the dialer as the client transport's DialContext.
	client := &http.Client{Transport: &http.Transport{DialContext: p.dialer.DialContext}}
	t.Cleanup(client.CloseIdleConnections)

	body := bytes.Repeat([]byte("ucxnet "), 300_000) // 2.1 MB: many frames
	for _, tc := range []struct {
		method string
		body   []byte
	}{{"GET", nil}, {"POST", body}} {
		req, err := http.NewRequestWithContext(ctxFor(t, 20e9), tc.method, "http://"+ln.Addr().String()+"/x", bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: reading the body: %v", tc.method, err)
		}
		if want := fmt.Sprintf("%s %s /x %x", p.client.Name(), tc.method, sha256.Sum256(tc.body)); resp.StatusCode != 200 || string(got) != want {
			t.Fatalf("%s: %d %q, want 200 %q", tc.method, resp.StatusCode, got, want)
		}
	}
}
