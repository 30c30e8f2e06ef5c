package cucx

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

func TestErrorUnwrap(t *testing.T) {
	cases := []struct {
		st   Status
		want error
	}{
		{StatusUnreachable, syscall.ECONNREFUSED},
		{StatusConnReset, syscall.ECONNRESET},
		{StatusTimedOut, syscall.ECONNRESET},
		{StatusIOError, syscall.ECONNRESET},
		{-41, syscall.ECONNRESET}, // a link failure
		{-70, syscall.ECONNRESET}, // an endpoint failure
		{StatusNoMemory, syscall.ENOMEM},
		{StatusCanceled, syscall.ECANCELED},
		{StatusInvalidAddr, ErrBadAddress},
		{StatusBusy, nil},
		{StatusInvalidParam, nil},
		{StatusTimedOutOp, nil},
	}
	for _, c := range cases {
		err := error(&Error{Op: "send", Status: c.st})
		if got := errors.Unwrap(err); got != c.want {
			t.Errorf("status %d: unwraps to %v, want %v", c.st, got, c.want)
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("status %d: errors.Is(%v) false", c.st, c.want)
		}
	}
	if got := (&Error{Op: "create endpoint", Status: StatusUnreachable}).Error(); got != "ucx: create endpoint: Destination is unreachable" {
		t.Errorf("Error() = %q", got)
	}
	if got := StatusString(-30); got != "Unknown error -30" {
		t.Errorf("StatusString(-30) = %q", got)
	}
}

// TestTransports parses ucp_ep_print_info texts captured from UCX 1.13.1
// (testdata/epinfo; regenerate with CUCX_UPDATE_TESTDATA=1 under UCX_TLS=tcp
// and UCX_TLS=sm, go test -run TestCaptureEPInfo).
func TestTransports(t *testing.T) {
	for name, want := range map[string][]string{
		"tcp.txt": {"tcp/lo"},
		"sm.txt":  {"sysv/memory"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "epinfo", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := Transports(string(b)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	multi := "#                 lane[0]:  2:posix/memory.0 md1 -> md[1]/posix am am_bw#0\n" +
		"#                 lane[1]:  8:cma/memory.0 md4 -> md[4]/cma rma_bw#0\n" +
		"#                 lane[2]:  2:posix/memory.0 md1 -> md[1]/posix wireup\n" +
		"#                 lane[3]:  1:rc_mlx5/mlx5_0:1.0 md2 -> md[2]/ib rma_bw#1\n"
	if got, want := Transports(multi), []string{"posix/memory", "cma/memory", "rc_mlx5/mlx5_0:1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("multi-lane: %v, want %v", got, want)
	}
	if got := Transports(""); got != nil {
		t.Errorf("empty: %v", got)
	}
}
