//go:build linux && cgo

package cucx

/*
#cgo pkg-config: ucx
#include <ucp/api/ucp.h>

static unsigned cucx_api_major(void) { return UCP_API_MAJOR; }
static unsigned cucx_api_minor(void) { return UCP_API_MINOR; }
*/
import "C"

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// BuildRelease returns the UCX release whose headers this binding was
// compiled against, as major.minor ("1.13").
func BuildRelease() string {
	return fmt.Sprintf("%d.%d", uint(C.cucx_api_major()), uint(C.cucx_api_minor()))
}

// LibraryPath returns the file the UCP library was loaded from (from
// /proc/self/maps), or "" if it cannot tell.
func LibraryPath() string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 6 && strings.Contains(fields[5], "/libucp.so") {
			return fields[5]
		}
	}
	return ""
}
