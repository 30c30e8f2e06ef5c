package registry

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if goroutines outlive them. The
// package is pure Go and starts nothing long-lived, so nothing is ignored.
// Run with $UCXNET_TEST_FAKE_REGISTRY set, the test binary is instead
// another user's fake registry server (see runFakeRegistry).
func TestMain(m *testing.M) {
	if addr := os.Getenv(envFakeRegistry); addr != "" {
		os.Exit(runFakeRegistry(addr))
	}
	goleak.VerifyTestMain(m)
}

// envFakeRegistry makes the test binary a fake registry server listening
// on its value (see TestMain).
const envFakeRegistry = "UCXNET_TEST_FAKE_REGISTRY"

// runFakeRegistry is the attacker's registry: it listens on addr, prints
// "port N", then for every request prints "auth " and the Authorization
// header it carried, and answers with an entry of its own for any name.
// It returns when stdin closes.
func runFakeRegistry(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("auth %s\n", r.Header.Get("Authorization"))
		name := strings.TrimPrefix(r.URL.Path, "/v1/entries/")
		writeJSON(w, http.StatusOK, Entry{Name: name, Address: []byte("attacker")})
	}))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
