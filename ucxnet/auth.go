package ucxnet

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// Pre-shared-key authentication of the handshake (handshake.go has the
// frame sequence, cpace.go the key exchange).
//
// UCX authenticates nothing. With a key on both sides the handshake runs
// CPace, a password-authenticated key exchange: the dialer's CONNECT and
// the listener's ACCEPT each carry a challenge, a fresh 32-byte nonce and
// a CPace share made from the key, and both derive the session key ISK.
// Then each proves it holds ISK, the listener only after the dialer:
// the dialer's AUTH carries HMAC(kd, "dial", Nd, Nl, ids, name) and only a
// listener that checked it answers with HMAC(kl, "accept", ...), kd and kl
// derived from ISK for each direction, so neither proof can be reflected as
// the other. A share reveals nothing about the key, and neither side sends
// anything else computed from the key before it has the other's share, so
// a peer without the key (a dialer, or an impostor listener found under
// the name) tests one guess of the key per handshake, and none offline
// (version 2 of this handshake keyed the MACs with the key itself: the
// dialer's proof let an impostor listener test 137,000 guesses per second
// offline). Both shares are fresh, so no proof can be replayed into
// another handshake. Keys are at least MinPSKLen bytes; a key file must
// belong to the user (or root) and must not be readable by group or others.

// EnvPSKFile names the environment variable holding the path of a file with
// the pre-shared key used when Dialer.PSK or ListenConfig.PSK is nil.
const EnvPSKFile = "UCXNET_PSK_FILE"

// MinPSKLen is the shortest pre-shared key accepted (a short key falls to
// brute force).
const MinPSKLen = 16

const (
	// nonceLen is the size of a keyed handshake's challenge (Hello.Nonce):
	// a random nonce and a CPace share.
	nonceLen    = randLen + cpaceShareLen
	randLen     = 32
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
	nd, nl  []byte // the dialer's and the listener's challenges: nonce ‖ CPace share
	name    string // the listener name, bound into the generator and the MACs
	ln      *Listener
	proving bool             // dialer: AUTH sent, waiting for the listener's confirmation
	listen  bool             // this is the listener's side
	y       *ecdh.PrivateKey // this side's CPace scalar
	isk     []byte           // the CPace session key, once both challenges are known
}

// newDialAuth returns a dialer's authentication state for the listener
// name; with a key, its challenge Nd is drawn.
func newDialAuth(psk []byte, name string) *authState {
	a := &authState{psk: psk, name: name}
	if psk != nil {
		a.nd = a.challenge()
	}
	return a
}

// newListenAuth returns the authentication state of a conn that ln (with
// a key) accepts under name, for the dialer's challenge nd (nonceLen
// bytes, checked by the caller); it draws the listener's challenge Nl.
func newListenAuth(psk []byte, name string, nd []byte, ln *Listener) *authState {
	a := &authState{psk: psk, name: name, nd: nd, ln: ln, listen: true}
	a.nl = a.challenge()
	return a
}

// challenge draws this side's nonce and CPace scalar and returns the
// challenge: nonce ‖ X25519(scalar, generator).
func (a *authState) challenge() []byte {
	b := newNonce()
	y, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		panic("ucxnet: no randomness: " + err.Error())
	}
	a.y = y
	share, err := x25519With(y, cachedGenerator(a.psk, a.name))
	if err != nil {
		// Only a generator of low order fails, and the map gives one only
		// for a key whose hash hits one of a dozen values.
		panic("ucxnet: CPace generator of low order: " + err.Error())
	}
	copy(b[randLen:], share)
	return b
}

// errBadChallenge says a peer's challenge was not a valid CPace share.
var errBadChallenge = errors.New("bad authentication challenge (a peer with another handshake version, or a low-order CPace share)")

// sessionKey returns ISK, computing it once the peer's challenge is known.
func (a *authState) sessionKey() ([]byte, error) {
	if a.isk != nil {
		return a.isk, nil
	}
	if len(a.nd) != nonceLen || len(a.nl) != nonceLen || a.y == nil {
		return nil, errBadChallenge
	}
	peer := a.nl[randLen:]
	if a.listen {
		peer = a.nd[randLen:]
	}
	k, err := x25519With(a.y, peer)
	if err != nil {
		return nil, errBadChallenge
	}
	a.isk = cpaceISK(nil, k, a.nd[randLen:], a.nd[:randLen], a.nl[randLen:], a.nl[:randLen])
	a.y = nil
	return a.isk, nil
}

// proof returns role's MAC for the handshake between conns dialerID and
// listenerID.
func (a *authState) proof(role string, dialerID, listenerID uint64) ([]byte, error) {
	isk, err := a.sessionKey()
	if err != nil {
		return nil, err
	}
	return authMAC(isk, role, a.nd, a.nl, dialerID, listenerID, a.name), nil
}

// verify reports whether mac is role's proof for the handshake between
// conns dialerID and listenerID.
func (a *authState) verify(role string, mac []byte, dialerID, listenerID uint64) bool {
	want, err := a.proof(role, dialerID, listenerID)
	return err == nil && hmac.Equal(mac, want)
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
	// O_NONBLOCK: a FIFO put in the key's place must not block the open.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("ucxnet: reading pre-shared key (%s): %w", EnvPSKFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ucxnet: reading pre-shared key (%s): %w", EnvPSKFile, err)
	}
	if err := checkPSKFile(path, fi); err != nil {
		return nil, err
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

// checkPSKFile refuses a key file that is not a regular file, that group or
// others can read, or that belongs to another user than this one or root
// (its owner could read or change the key), as ssh does with its keys.
func checkPSKFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("ucxnet: pre-shared key file %s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("ucxnet: permissions %#o for pre-shared key file %s are too open: it must not be readable by group or others (chmod 600 %s)", perm, path, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Errorf("ucxnet: pre-shared key file %s is owned by uid %d, not by this user (uid %d) or root: its owner can read and change the key", path, st.Uid, os.Geteuid())
	}
	return nil
}

// newNonce returns nonceLen random bytes.
func newNonce() []byte {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		panic("ucxnet: no randomness: " + err.Error())
	}
	return b
}

// roleKey derives the key one role proves with from the session key.
func roleKey(isk []byte, role string) []byte {
	m := hmac.New(sha256.New, isk)
	m.Write([]byte("ucxnet/3 key " + role))
	return m.Sum(nil)
}

// authMAC is HMAC-SHA-256, under the role's own key, over the role, both
// challenges, both conn ids and the listener name.
func authMAC(isk []byte, role string, nd, nl []byte, dialerID, listenerID uint64, name string) []byte {
	m := hmac.New(sha256.New, roleKey(isk, role))
	m.Write([]byte("ucxnet/3 " + role + "\x00"))
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
