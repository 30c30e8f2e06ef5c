package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/registry"
)

// startRegistry runs "ucxnet registry" with env and args until the test
// ends and returns its base URL and its stderr.
func startRegistry(t *testing.T, ctx context.Context, env []string, args ...string) (string, *lockedBuffer) {
	t.Helper()
	line, srvErr := startReady(t, regCommand(ctx, env, append([]string{"registry"}, args...)...), "listening on ")
	return strings.TrimPrefix(line, "listening on "), srvErr
}

// eventuallyContains waits up to 10 s for b to contain s: the child's
// stderr reaches b through a copying goroutine, maybe after its stdout line.
func eventuallyContains(b *lockedBuffer, s string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(b.String(), s) {
			return true
		}
	}
	return false
}

func getStatus(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// With no token given, the registry makes one (0600, in a 0700 directory
// of the user's state dir), says where, and demands it; clients on this
// host find it.
func TestRegistryDefaultToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_STATE_HOME=", registry.EnvRegistryToken + "=", registry.EnvRegistryTokenFile + "="}
	base, srvErr := startRegistry(t, ctx, env, "--listen", "127.0.0.1:0", "-q")
	path := filepath.Join(home, ".local", "state", "ucxnet", "registry-token")
	if !eventuallyContains(srvErr, "new token written to "+path) {
		t.Errorf("registry does not say where the token is:\n%s", srvErr.String())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %#o, want 0600", fi.Mode().Perm())
	}
	tok, err := registry.ReadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(srvErr.String(), tok) {
		t.Errorf("the token is logged:\n%s", srvErr.String())
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if code := getStatus(t, c, base+"/v1/entries", ""); code != http.StatusUnauthorized {
		t.Errorf("listing without the token: %d, want 401", code)
	}
	if code := getStatus(t, c, base+"/v1/entries", tok); code != http.StatusOK {
		t.Errorf("listing with the token: %d, want 200", code)
	}

	// A client of the same user on this host finds the token by itself.
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(registry.EnvRegistryToken, "")
	t.Setenv(registry.EnvRegistryTokenFile, "")
	reg, err := registry.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.(*registry.HTTP).Close()
	e := registry.Entry{Name: "found-token", Address: []byte("a")}
	if err := reg.Register(ctx, e); err != nil {
		t.Fatalf("Register with the default token: %v", err)
	}

	// A second start reuses the file.
	_, srvErr2 := startRegistry(t, ctx, env, "--listen", "127.0.0.1:0", "-q")
	if !eventuallyContains(srvErr2, "token from "+path) {
		t.Errorf("second start:\n%s", srvErr2.String())
	}

	// A token file others can read is refused, as ssh refuses a key.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--listen", "127.0.0.1:0"}, {"--listen", "127.0.0.1:0", "--token-file", path}} {
		out, err := regCommand(ctx, env, append([]string{"registry"}, args...)...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "too open") || !strings.Contains(string(out), "chmod 600") {
			t.Errorf("registry %q with a 0644 token file: %v\n%s", args, err, out)
		}
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key, PEM, into dir.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ucxnet test registry"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// --tls-cert/--tls-key serve HTTPS; a client trusting the certificate
// (UCXNET_REGISTRY_CA) uses it, one that does not refuses it.
func TestRegistryTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	env := []string{"HOME=" + t.TempDir(), registry.EnvRegistryToken + "=tls-tok"}
	base, _ := startRegistry(t, ctx, env, "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, "-q")
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("registry with TLS serves %q", base)
	}

	t.Setenv(registry.EnvRegistryToken, "tls-tok")
	t.Setenv(registry.EnvRegistryCA, "")
	untrusting, err := registry.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.(*registry.HTTP).Close()
	e := registry.Entry{Name: "tls-entry", Address: []byte("a")}
	if err := untrusting.Register(ctx, e); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Register without trusting the certificate: %v", err)
	}

	t.Setenv(registry.EnvRegistryCA, cert)
	reg, err := registry.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.(*registry.HTTP).Close()
	if err := reg.Register(ctx, e); err != nil {
		t.Fatalf("Register over verified TLS: %v", err)
	}
	if got, err := reg.Resolve(ctx, "tls-entry"); err != nil || got.Name != "tls-entry" {
		t.Errorf("Resolve over TLS: %v %v", got, err)
	}

	// Half a key pair is a usage error.
	out, err := regCommand(ctx, env, "registry", "--listen", "127.0.0.1:0", "--tls-cert", cert).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("--tls-cert without --tls-key: %v\n%s", err, out)
	}
}
