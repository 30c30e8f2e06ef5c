package ucxnet

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHTTP runs net/http over ucxnet, HTTP/1.1 and unencrypted HTTP/2, with
// concurrent requests carrying large bodies verified by hash.
func TestHTTP(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h := sha256.New()
					n, err := io.Copy(h, r.Body)
					if err != nil {
						http.Error(w, err.Error(), 500)
						return
					}
					w.Header().Set("X-Sum", hex.EncodeToString(h.Sum(nil)))
					w.Header().Set("X-Proto", r.Proto)
					// Echo a body of the same size, derived from the hash.
					seed := h.Sum(nil)
					buf := bytes.Repeat(seed, 1024)
					for left := n; left > 0; {
						k := min(left, int64(len(buf)))
						w.Write(buf[:k])
						left -= k
					}
				})}
				tr := &http.Transport{DialContext: p.dialer.DialContext, MaxConnsPerHost: 8}
				if proto == "h2c" {
					srv.Protocols = new(http.Protocols)
					srv.Protocols.SetUnencryptedHTTP2(true)
					tr.Protocols = new(http.Protocols)
					tr.Protocols.SetUnencryptedHTTP2(true)
				}
				go srv.Serve(p.ln)
				defer srv.Close()
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}

				var wg sync.WaitGroup
				errs := make(chan error, 32)
				for i := range 24 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						size := (i%6)*700_000 + i*37
						body := make([]byte, size)
						rand.Read(body)
						sum := sha256.Sum256(body)
						url := fmt.Sprintf("http://%s/upload", p.ln.Addr())
						resp, err := client.Post(url, "application/octet-stream", bytes.NewReader(body))
						if err != nil {
							errs <- err
							return
						}
						defer resp.Body.Close()
						got, err := io.ReadAll(resp.Body)
						if err != nil {
							errs <- err
							return
						}
						if resp.Header.Get("X-Sum") != hex.EncodeToString(sum[:]) {
							errs <- fmt.Errorf("request %d: server saw a different body", i)
							return
						}
						want := bytes.Repeat(sum[:], 1024)
						for off := 0; off < len(got); off += len(want) {
							if !bytes.Equal(got[off:min(off+len(want), len(got))], want[:min(len(want), len(got)-off)]) {
								errs <- fmt.Errorf("request %d: response body corrupt at %d", i, off)
								return
							}
						}
						if len(got) != size {
							errs <- fmt.Errorf("request %d: got %d bytes, want %d", i, len(got), size)
							return
						}
						wantProto := "HTTP/1.1"
						if proto == "h2c" {
							wantProto = "HTTP/2.0"
						}
						if resp.Header.Get("X-Proto") != wantProto {
							errs <- fmt.Errorf("server saw %s, want %s", resp.Header.Get("X-Proto"), wantProto)
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
			})
		})
	}
}
