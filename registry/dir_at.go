package registry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// This file holds Dir's file operations. Each is relative to the
// directory descriptor that NewDir checked (openat(2) and friends), never
// to the path, and none follows a symbolic link in the directory.

// at runs f with d's directory descriptor, which stays open meanwhile.
func (d *Dir) at(f func(dirfd int) error) error {
	if d.dir == nil {
		return fmt.Errorf("registry: %s: not opened by NewDir", d.path)
	}
	rc, err := d.dir.SyscallConn()
	if err != nil {
		return fmt.Errorf("registry: %s: %w", d.path, err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return fmt.Errorf("registry: %s: %w", d.path, err)
	}
	return ferr
}

// pathErr is err as the os package would report op on name in d.
func (d *Dir) pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: filepath.Join(d.path, name), Err: err}
}

// openAt opens the file name of d with flags plus O_NOFOLLOW|O_CLOEXEC.
func (d *Dir) openAt(name string, flags int, perm uint32) (*os.File, error) {
	var nfd int
	err := d.at(func(dirfd int) error {
		var err error
		nfd, err = unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		return d.pathErr("open", name, err)
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), filepath.Join(d.path, name)), nil
}

// linkAt makes newName in d a hard link to oldName in d.
func (d *Dir) linkAt(oldName, newName string) error {
	return d.at(func(dirfd int) error {
		return d.pathErr("link", newName, unix.Linkat(dirfd, oldName, dirfd, newName, 0))
	})
}

// renameAt renames oldName in d to newName in d.
func (d *Dir) renameAt(oldName, newName string) error {
	return d.at(func(dirfd int) error {
		return d.pathErr("rename", newName, unix.Renameat(dirfd, oldName, dirfd, newName))
	})
}

// removeAt removes the file (not a directory) name from d.
func (d *Dir) removeAt(name string) error {
	return d.at(func(dirfd int) error {
		return d.pathErr("remove", name, unix.Unlinkat(dirfd, name, 0))
	})
}

// lstatAt returns nil if name exists in d (links are not followed).
func (d *Dir) lstatAt(name string) error {
	return d.at(func(dirfd int) error {
		var st unix.Stat_t
		return d.pathErr("lstat", name, unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW))
	})
}

// readDir lists d, unsorted, through a fresh descriptor of it.
func (d *Dir) readDir() ([]fs.DirEntry, error) {
	f, err := d.openAt(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// writeTemp writes data to a new temporary file of mode 0600 in d, named
// after tmpPattern, and returns its name.
func (d *Dir) writeTemp(data []byte) (string, error) {
	for try := 0; ; try++ {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := tmpPattern[:len(tmpPattern)-1] + hex.EncodeToString(b[:])
		f, err := d.openAt(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 10 {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("registry: %w", err)
		}
		_, werr := f.Write(data)
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			d.removeAt(name)
			return "", fmt.Errorf("registry: writing %s: %w", f.Name(), err)
		}
		return name, nil
	}
}
