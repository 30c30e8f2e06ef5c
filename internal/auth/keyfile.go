package auth

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadKeyFile returns the key in the file at path, less trailing line
// ends. As ssh does with its keys, it refuses a file that is not a regular
// file, that group or others can read, or that belongs to another user
// than this one or root (its owner could read or change the key). It
// opens the file without blocking, so a FIFO put in its place is refused
// rather than waited on.
func ReadKeyFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("reading pre-shared key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading pre-shared key: %w", err)
	}
	if err := checkKeyFile(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("reading pre-shared key: %w", err)
	}
	return bytes.TrimRight(b, "\r\n"), nil
}

// checkKeyFile refuses a key file that is not a regular file, that group
// or others can read, or that belongs to another user than this one or
// root.
func checkKeyFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("pre-shared key file %s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("permissions %#o for pre-shared key file %s are too open: it must not be readable by group or others (chmod 600 %s)", perm, path, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Errorf("pre-shared key file %s is owned by uid %d, not by this user (uid %d) or root: its owner can read and change the key", path, st.Uid, os.Geteuid())
	}
	return nil
}
