//go:build linux

package cloexec

import (
	"encoding/binary"
	"strconv"

	"golang.org/x/sys/unix"
)

// supported reports whether this platform sweeps.
const supported = true

// markCloexec marks FD_CLOEXEC on each descriptor above 2 that lacks it and
// inheritable says UCX would leave open across exec; it returns how many
// it marked. buf is scratch space for the directory entries.
func markCloexec(buf []byte) int {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(dir)
	marked := 0
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil || n <= 0 {
			return marked
		}
		for off := 0; off+19 <= n; {
			// struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return marked
			}
			fd, ok := direntFD(buf[off+19 : off+reclen])
			off += reclen
			if !ok || fd <= 2 || fd == dir {
				continue
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC != 0 || !inheritable(fd) {
				continue
			}
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err == nil {
				marked++
			}
		}
	}
}

// direntFD parses a /proc/self/fd entry's NUL-terminated name.
func direntFD(name []byte) (int, bool) {
	fd := 0
	for i, b := range name {
		switch {
		case b == 0:
			return fd, i > 0
		case b < '0' || b > '9' || i > 9:
			return 0, false
		}
		fd = fd*10 + int(b-'0')
	}
	return fd, len(name) > 0
}

// inheritable reports whether fd is of a kind UCX creates without
// close-on-exec and the sweep marks: a socket, or an epoll, eventfd or
// timerfd instance. Pipes and files are left alone: an application may
// mean a child to inherit those, and UCX's do not keep a peer from seeing
// this process die.
func inheritable(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		return true
	}
	var link [32]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), link[:])
	if err != nil {
		return false
	}
	switch string(link[:n]) {
	case "anon_inode:[eventpoll]", "anon_inode:[eventfd]", "anon_inode:[timerfd]":
		return true
	}
	return false
}
