//go:build unix

package ucxetcd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processAlive reports whether process pid, started at startTime (field 22
// of /proc/PID/stat; 0: unknown), may still be running on this host, and if
// not why.
func processAlive(pid int, startTime uint64, host string) (bool, string) {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false, fmt.Sprintf("publisher pid %d on %s is gone", pid, host)
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && procMounted() {
			return false, fmt.Sprintf("publisher pid %d on %s is gone", pid, host)
		}
		return true, ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return true, ""
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3, the state
	if len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X") {
		return false, fmt.Sprintf("publisher pid %d on %s has exited (zombie)", pid, host)
	}
	const idx = 22 - 3
	if startTime == 0 || len(fields) <= idx {
		return true, ""
	}
	if st, err := strconv.ParseUint(fields[idx], 10, 64); err == nil && st != startTime {
		return false, fmt.Sprintf("pid %d was reused (start time %d, entry has %d)", pid, st, startTime)
	}
	return true, ""
}

// procMounted reports whether /proc is usable, so that a missing /proc/PID
// means a missing process.
func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}
