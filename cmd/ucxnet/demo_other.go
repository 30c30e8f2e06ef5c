//go:build !linux

package main

import "os/exec"

// setChildAttrs does nothing here: the demo server exits when its stdin
// (a pipe from this process) reaches EOF.
func setChildAttrs(cmd *exec.Cmd) {}
