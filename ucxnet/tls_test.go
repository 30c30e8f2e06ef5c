package ucxnet

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tlsConfigs returns a server config with a fresh self-signed ECDSA
// certificate for "ucxnet.test" and a client config that trusts only it.
func tlsConfigs(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ucxnet.test"},
		DNSNames:              []string{"ucxnet.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	client = &tls.Config{RootCAs: pool, ServerName: "ucxnet.test"}
	return server, client
}

// TLS over ucxnet conns: handshake, then a few MiB echoed through it.
func TestTLSEcho(t *testing.T) {
	scfg, ccfg := tlsConfigs(t)
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {
		c, s := p.conns(t)
		srv := tls.Server(s, scfg)
		cli := tls.Client(c, ccfg)
		defer cli.Close()
		defer srv.Close()

		echoed := make(chan error, 1)
		go func() {
			if err := srv.HandshakeContext(t.Context()); err != nil {
				echoed <- err
				return
			}
			_, err := io.Copy(srv, srv)
			if err == nil {
				err = srv.CloseWrite()
			}
			echoed <- err
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		require.NoError(t, cli.HandshakeContext(ctx))
		st := cli.ConnectionState()
		require.True(t, st.HandshakeComplete)
		t.Logf("TLS %s, %s", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))

		const size = 4 << 20
		msg := make([]byte, size)
		rand.Read(msg)
		wrote := make(chan error, 1)
		go func() {
			// Random-sized writes: records of every size.
			rest := msg
			for len(rest) > 0 {
				n := min(len(rest), 1+int(rest[0])*257)
				if _, err := cli.Write(rest[:n]); err != nil {
					wrote <- err
					return
				}
				rest = rest[n:]
			}
			wrote <- cli.CloseWrite()
		}()
		start := time.Now()
		got, err := io.ReadAll(cli)
		require.NoError(t, err)
		require.NoError(t, <-wrote)
		require.NoError(t, <-echoed)
		require.Equal(t, len(msg), len(got))
		require.True(t, bytes.Equal(msg, got), "echoed data differs")
		t.Logf("echoed %d MiB through TLS in %v", size>>20, time.Since(start).Round(time.Millisecond))
	})
}

// A client handshake whose server never answers: closing the conn from
// another goroutine, cancelling the context, or a deadline each unblock it
// promptly.
func TestTLSHandshakeCancelled(t *testing.T) {
	_, ccfg := tlsConfigs(t)
	forEachEngine(t, Config{}, func(t *testing.T, p *pair) {

		t.Run("Close", func(t *testing.T) {
			c, s := p.conns(t) // s is never read: the ClientHello is never answered
			defer s.Close()
			done := make(chan error, 1)
			go func() { done <- tls.Client(c, ccfg).HandshakeContext(context.Background()) }()
			time.Sleep(100 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("handshake ended before Close: %v", err)
			default:
			}
			closed := time.Now()
			require.NoError(t, c.Close())
			select {
			case err := <-done:
				require.Error(t, err)
				require.True(t, errors.Is(err, net.ErrClosed), "%v", err)
				t.Logf("handshake unblocked %v after Close: %v", time.Since(closed), err)
			case <-time.After(2 * time.Second):
				t.Fatal("Close did not unblock the handshake within 2 s")
			}
		})

		t.Run("Context", func(t *testing.T) {
			c, s := p.conns(t)
			defer s.Close()
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tls.Client(c, ccfg).HandshakeContext(ctx) }()
			time.Sleep(100 * time.Millisecond)
			cancelled := time.Now()
			cancel()
			select {
			case err := <-done:
				require.Error(t, err)
				t.Logf("handshake unblocked %v after cancel: %v", time.Since(cancelled), err)
			case <-time.After(2 * time.Second):
				t.Fatal("cancelling the context did not unblock the handshake within 2 s")
			}
		})

		t.Run("Deadline", func(t *testing.T) {
			c, s := p.conns(t)
			defer s.Close()
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(200*time.Millisecond)))
			start := time.Now()
			err := tls.Client(c, ccfg).HandshakeContext(context.Background())
			elapsed := time.Since(start)
			require.Error(t, err)
			require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			require.True(t, ne.Timeout())
			require.GreaterOrEqual(t, elapsed, 200*time.Millisecond, "timed out before the deadline")
			t.Logf("handshake timed out after %v: %v", elapsed, err)
		})
	})
}
