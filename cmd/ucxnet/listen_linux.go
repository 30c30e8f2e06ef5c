package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// listeningTCP returns the TCP addresses ("IP:PORT", "[IPv6]:PORT") this
// process listens on: the LISTEN sockets of /proc/self/net/tcp and tcp6
// whose inodes are among the sockets in /proc/self/fd. That includes the
// sockets UCX's tcp transport opens, which Go knows nothing about.
func listeningTCP() ([]string, error) {
	inodes, err := socketInodes("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	var out []string
	found := false
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6, say
		}
		if err != nil {
			return nil, err
		}
		found = true
		out = append(out, parseProcNetTCPListen(b, inodes)...)
	}
	if !found {
		return nil, errors.New("/proc/self/net/tcp not readable")
	}
	sort.Strings(out)
	return out, nil
}

// socketInodes returns the inodes of the sockets open in dir, a
// /proc/PID/fd.
func socketInodes(dir string) (map[uint64]bool, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, de := range des {
		l, err := os.Readlink(filepath.Join(dir, de.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if v, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	return inodes, nil
}

// parseProcNetTCPListen returns the local addresses of the LISTEN (state
// 0A) sockets in b, the contents of /proc/net/tcp or tcp6, whose inode is
// in inodes. Malformed lines are skipped.
func parseProcNetTCPListen(b []byte, inodes map[uint64]bool) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || !inodes[ino] {
			continue
		}
		if a, err := parseProcAddr(f[1]); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// parseProcAddr decodes "0100007F:1F90" (IPv4) or 32 hex digits and a
// port (IPv6): the address as 32-bit words in host byte order, the port
// in hex.
func parseProcAddr(s string) (string, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", fmt.Errorf("bad port in %q", s)
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", fmt.Errorf("bad address %q", s)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}
