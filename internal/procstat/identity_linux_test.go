package procstat

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// sleepingChild starts `sleep 60`, killed when t ends, and returns it with
// its identity.
func sleepingChild(t *testing.T) (*exec.Cmd, stream.ProcID) {
	t.Helper()
	self := Self()
	require.NotZero(t, self.PID, "this process has no identity")
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("needs sleep(1):", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	st, err := Read(cmd.Process.Pid)
	require.NoError(t, err)
	return cmd, stream.ProcID{PID: uint32(cmd.Process.Pid), Start: st.Start, PidNS: self.PidNS, Boot: self.Boot}
}

// procStopped reports whether id names a process StateOf finds stopped.
func procStopped(id stream.ProcID) bool {
	state, ok := StateOf(id)
	return ok && Stopped(state)
}

// TestProcStoppedRules: only a stopped or traced process of this user,
// boot and pid namespace, with the start time named, counts as stopped.
func TestProcStoppedRules(t *testing.T) {
	self := Self()
	cmd, id := sleepingChild(t)
	require.False(t, procStopped(id), "a sleeping process is not stopped")
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool { return procStopped(id) }, 10*time.Second, time.Millisecond)
	for name, mod := range map[string]func(*stream.ProcID){
		"start time": func(id *stream.ProcID) { id.Start++ },
		"boot":       func(id *stream.ProcID) { id.Boot[0] ^= 1 },
		"pid ns":     func(id *stream.ProcID) { id.PidNS++ },
		"pid":        func(id *stream.ProcID) { id.PID = 0 },
	} {
		other := id
		mod(&other)
		require.False(t, procStopped(other), "another %s", name)
	}
	require.False(t, procStopped(self), "this process")
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { return !procStopped(id) }, 10*time.Second, time.Millisecond)

	// A debugger's stop: attached with ptrace, the process is in a tracing
	// stop (state 't').
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	defer runtime.UnlockOSThread()
	if err := syscall.PtraceAttach(cmd.Process.Pid); err != nil {
		t.Skip("ptrace is not allowed here:", err)
	}
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WALL, nil)
	require.NoError(t, err)
	require.True(t, ws.Stopped(), "%v", ws)
	st, err := Read(cmd.Process.Pid)
	require.NoError(t, err)
	require.Equal(t, byte('t'), st.State)
	require.True(t, procStopped(id), "a traced process is stopped")
	require.NoError(t, syscall.PtraceDetach(cmd.Process.Pid))
	require.Eventually(t, func() bool { return !procStopped(id) }, 10*time.Second, time.Millisecond)
}
