package procstat

import (
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// Self returns this process's identity: pid, start time, pid namespace and
// boot id; the zero ProcID where /proc does not give all of it.
func Self() stream.ProcID { return self() }

var self = sync.OnceValue(func() stream.ProcID {
	st, err := Read(os.Getpid())
	if err != nil {
		return stream.ProcID{}
	}
	ns, boot, ok := hostNamespace()
	if !ok {
		return stream.ProcID{}
	}
	return stream.ProcID{PID: uint32(os.Getpid()), Start: st.Start, PidNS: ns, Boot: boot}
})

// hostNamespace reads this process's pid namespace (its inode) and the
// host's boot id.
func hostNamespace() (pidNS uint64, boot [16]byte, ok bool) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || !strings.HasPrefix(link, "pid:[") || !strings.HasSuffix(link, "]") {
		return 0, boot, false
	}
	pidNS, err = strconv.ParseUint(link[len("pid:["):len(link)-1], 10, 64)
	if err != nil {
		return 0, boot, false
	}
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0, boot, false
	}
	b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(id)), "-", ""))
	if err != nil || len(b) != len(boot) {
		return 0, boot, false
	}
	copy(boot[:], b)
	return pidNS, boot, true
}
