//go:build !unix

package ucxnet

// readinessFD has no pipe to give off Unix.
func readinessFD(_, _ bool, _ func(fd uintptr) bool) error { return errNoDescriptor }
