package ucxnet

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"
)

// Pre-shared-key authentication of the handshake (handshake.go has the
// frame sequence).
//
// UCX authenticates nothing. With a key on both sides the handshake becomes
// a mutual challenge-response in which the listener proves nothing before
// the dialer has: the listener's ACCEPT carries only its nonce, the dialer
// answers with HMAC(kd, "dial", Nd, Nl, ids, name), and only a listener
// that checked that proof answers with HMAC(kl, "accept", ...). A dialer
// without the key thus gets no MAC over input it chose (the earlier order
// made the listener an offline oracle for guessing short keys). kd and kl
// are derived from the key for each direction, so neither proof can be
// reflected as the other. Both nonces are fresh random values, so no proof
// can be replayed into another handshake. Keys are at least MinPSKLen
// bytes, and a key file must not be readable by group or others.

// EnvPSKFile names the environment variable holding the path of a file with
// the pre-shared key used when Dialer.PSK or ListenConfig.PSK is nil.
const EnvPSKFile = "UCXNET_PSK_FILE"

// MinPSKLen is the shortest pre-shared key accepted (a short key falls to
// brute force).
const MinPSKLen = 16

const (
	nonceLen    = 32
	authTimeout = 5 * time.Second // a listener waits this long for a dialer's proof
)

// The two roles' MAC labels.
const (
	roleDialer   = "dial"
	roleListener = "accept"
)

// authState is a conn's handshake authentication state.
type authState struct {
	psk     []byte
	nd, nl  []byte // the dialer's and the listener's nonces
	name    string // the listener name, bound into the MACs
	ln      *Listener
	proving bool // dialer: AUTH sent, waiting for the listener's confirmation
}

// resolvePSK returns key, or the key in the file EnvPSKFile names, or nil.
func resolvePSK(key []byte) ([]byte, error) {
	if key != nil {
		if len(key) < MinPSKLen {
			return nil, fmt.Errorf("ucxnet: pre-shared key of %d bytes is too short (at least %d)", len(key), MinPSKLen)
		}
		return key, nil
	}
	path := os.Getenv(EnvPSKFile)
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ucxnet: reading pre-shared key (%s): %w", EnvPSKFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ucxnet: reading pre-shared key (%s): %w", EnvPSKFile, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("ucxnet: permissions %#o for pre-shared key file %s are too open: it must not be readable by group or others (chmod 600 %s)", perm, path, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("ucxnet: reading pre-shared key (%s): %w", EnvPSKFile, err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) < MinPSKLen {
		return nil, fmt.Errorf("ucxnet: pre-shared key in %s is %d bytes, too short (at least %d)", path, len(b), MinPSKLen)
	}
	return b, nil
}

func newNonce() []byte {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		panic("ucxnet: no randomness: " + err.Error())
	}
	return b
}

// roleKey derives the key one role proves with from the pre-shared key.
func roleKey(psk []byte, role string) []byte {
	m := hmac.New(sha256.New, psk)
	m.Write([]byte("ucxnet/2 key " + role))
	return m.Sum(nil)
}

// authMAC is HMAC-SHA-256, under the role's own key, over the role, both
// nonces, both conn ids and the listener name.
func authMAC(psk []byte, role string, nd, nl []byte, dialerID, listenerID uint64, name string) []byte {
	m := hmac.New(sha256.New, roleKey(psk, role))
	m.Write([]byte("ucxnet/2 " + role + "\x00"))
	var n [2]byte
	for _, b := range [][]byte{nd, nl} {
		binary.LittleEndian.PutUint16(n[:], uint16(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	var ids [16]byte
	binary.LittleEndian.PutUint64(ids[:8], dialerID)
	binary.LittleEndian.PutUint64(ids[8:], listenerID)
	m.Write(ids[:])
	m.Write([]byte(name))
	return m.Sum(nil)
}
