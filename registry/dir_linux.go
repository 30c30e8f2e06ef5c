package registry

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

// procStartTime returns field 22 of /proc/pid/stat, the start time of
// process pid in clock ticks since boot. The error wraps fs.ErrNotExist
// when there is no such process.
func procStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatStartTime(data)
}

// procZombie reports whether process pid has exited but is not yet reaped:
// kill(pid, 0) still succeeds for it, yet it will never serve again.
func procZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state == 'Z' || state == 'X'
}

// procMounted reports whether /proc is usable, so that a missing
// /proc/PID means a missing process.
var procMounted = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
})
