//go:build !linux

package main

import "io"

// isTerminal reports whether w is a terminal: off Linux it says no, and
// progress is written one line per step.
func isTerminal(io.Writer) bool { return false }
