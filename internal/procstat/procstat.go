// Package procstat reads a Linux process's state and start time from
// /proc/PID/stat, and identifies processes across a host: Self names this
// process (pid, start time, pid namespace, boot id) for the Hellos
// ucxnet sends (stream.ProcID). Off Linux a process has no identity.
package procstat

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is what this package reads of /proc/PID/stat.
type Stat struct {
	State byte   // field 3: 'R', 'S', 'D', 'T' (stopped), 't' (traced), 'Z' (zombie), ...
	Start uint64 // field 22: start time in clock ticks after boot
}

// Parse extracts the fields of Stat from the contents of /proc/PID/stat.
// Field 2 (comm) is in parentheses and may itself contain spaces and
// parentheses, so fields are counted from the last ')'.
func Parse(data []byte) (Stat, error) {
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, errors.New("procstat: malformed stat: no ')'")
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3 (state)
	const idx = 22 - 3
	if len(fields) <= idx {
		return Stat{}, fmt.Errorf("procstat: malformed stat: %d fields after comm", len(fields))
	}
	if len(fields[0]) != 1 {
		return Stat{}, fmt.Errorf("procstat: malformed stat: state %q", fields[0])
	}
	v, err := strconv.ParseUint(fields[idx], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("procstat: malformed stat: %w", err)
	}
	return Stat{State: fields[0][0], Start: v}, nil
}

// Read reads and parses /proc/PID/stat. The error wraps fs.ErrNotExist
// when there is no such process (or no /proc).
func Read(pid int) (Stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return Parse(data)
}
