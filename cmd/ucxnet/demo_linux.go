package main

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes the kernel kill the demo server if this process dies
// without cleaning up (e.g. SIGKILL).
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
