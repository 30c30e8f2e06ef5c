package registry

import (
	"os"
	"sync"

	"github.com/ucxnet/ucxnet/internal/procstat"
)

// procStartTime returns field 22 of /proc/pid/stat, the start time of
// process pid in clock ticks since boot. The error wraps fs.ErrNotExist
// when there is no such process.
func procStartTime(pid int) (uint64, error) {
	st, err := procstat.Read(pid)
	return st.Start, err
}

// procZombie reports whether process pid has exited but is not yet reaped:
// kill(pid, 0) still succeeds for it, yet it will never serve again.
func procZombie(pid int) bool {
	st, err := procstat.Read(pid)
	return err == nil && (st.State == 'Z' || st.State == 'X')
}

// procMounted reports whether /proc is usable, so that a missing
// /proc/PID means a missing process.
var procMounted = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
})
