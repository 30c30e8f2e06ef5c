package registry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// EnvRegistryTokenFile names the environment variable holding the path of
// a file with the bearer token for the [HTTP] backend, read when
// $UCXNET_REGISTRY_TOKEN is unset. The file must not be readable by group
// or others.
const EnvRegistryTokenFile = "UCXNET_REGISTRY_TOKEN_FILE"

// EnvRegistryCA names the environment variable holding the path of a PEM
// file of CA certificates that the [HTTP] backend trusts, instead of the
// system's, for an "https://" registry.
const EnvRegistryCA = "UCXNET_REGISTRY_CA"

// ErrUnsafeToken reports a token file that other users could read, or
// that is not a regular file of this user's.
var ErrUnsafeToken = errors.New("registry: unsafe token file")

// maxTokenFile bounds what ReadTokenFile reads.
const maxTokenFile = 4096

// DefaultTokenFile returns where "ucxnet registry" keeps the token it
// generates on first start, and where the [HTTP] backend looks for a token
// for a registry on this host: $XDG_STATE_HOME/ucxnet/registry-token, or
// ~/.local/state/ucxnet/registry-token.
func DefaultTokenFile() (string, error) {
	if s := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(s) {
		return filepath.Join(s, "ucxnet", "registry-token"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		if err == nil {
			err = fmt.Errorf("home directory %q is not absolute", home)
		}
		return "", fmt.Errorf("registry: no default token file: %w; set %s or %s", err, EnvRegistryToken, EnvRegistryTokenFile)
	}
	return filepath.Join(home, ".local", "state", "ucxnet", "registry-token"), nil
}

// ReadTokenFile reads a bearer token from path, as ssh reads a private
// key: the file (links are followed) must be a regular file owned by this
// user (or root) with no permission bits for group or others, else the
// error wraps [ErrUnsafeToken] and says what to change. Surrounding
// white space is dropped; an empty token is an error. A missing file
// gives an error wrapping [fs.ErrNotExist].
func ReadTokenFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("registry: token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("registry: token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file (mode %s)", ErrUnsafeToken, path, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return "", fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d)", ErrUnsafeToken, path, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%w: permissions %#o for %s are too open: group or others may read the token; run \"chmod 600 %s\"", ErrUnsafeToken, perm, path, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("registry: token file %s: %w", path, err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("registry: token file %s is larger than %d bytes", path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("registry: token file %s is empty", path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("registry: token file %s holds more than one word", path)
	}
	return tok, nil
}

// EnsureTokenFile returns the token in path, first creating the file with
// a fresh random token (32 bytes, hex) and mode 0600, and its directory
// with mode 0700, if it does not exist; created says whether it did. The
// directory is checked as [NewDir] checks a registry directory, and an
// existing file as [ReadTokenFile] does.
func EnsureTokenFile(path string) (token string, created bool, err error) {
	tok, err := ReadTokenFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, false, err
	}
	dir := filepath.Dir(path)
	if err := makeDir(dir); err != nil {
		return "", false, err
	}
	d, err := openCheckedDir(dir)
	if err != nil {
		return "", false, fmt.Errorf("token directory: %w", err)
	}
	defer d.Close()
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok = hex.EncodeToString(b[:])
	// Created in the directory just checked, whatever its path names now.
	fd, err := unix.Openat(int(d.Fd()), filepath.Base(path), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		// Another process made it meanwhile: use its token.
		tok, err := ReadTokenFile(path)
		return tok, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("registry: creating token file: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	_, werr := f.WriteString(tok + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = unix.Unlinkat(int(d.Fd()), filepath.Base(path), 0)
		return "", false, fmt.Errorf("registry: writing token file %s: %w", path, err)
	}
	return tok, true, nil
}

// clientToken returns the token the HTTP backend sends to the registry at
// host (host:port of the URL): $UCXNET_REGISTRY_TOKEN; else the file named
// by $UCXNET_REGISTRY_TOKEN_FILE; else, for a registry on a loopback
// address only, the [DefaultTokenFile] if it exists; else none. fromFile
// is the default token file's path when the token came from it: that
// token may then only go to a server of this user (ownerCheckedDial).
func clientToken(host string) (tok, fromFile string, err error) {
	if t := strings.TrimSpace(os.Getenv(EnvRegistryToken)); t != "" {
		return t, "", nil
	}
	if f := os.Getenv(EnvRegistryTokenFile); f != "" {
		tok, err := ReadTokenFile(f)
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", EnvRegistryTokenFile, err)
		}
		return tok, "", nil
	}
	if !loopbackHost(host) {
		return "", "", nil
	}
	f, err := DefaultTokenFile()
	if err != nil {
		return "", "", nil
	}
	tok, err = ReadTokenFile(f)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", "", err
	}
	return tok, f, nil
}

// loopbackHost reports whether hostport names this host: "localhost" or a
// loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
