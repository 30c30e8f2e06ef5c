// Package auth authenticates ucxnet's handshake with a pre-shared key:
// CPace challenges, the session key, each role's proof, and the checks on
// a key file. It is pure Go on the standard library.
//
// UCX authenticates nothing. With a key on both sides the handshake runs
// CPace, a password-authenticated key exchange: the dialer's CONNECT and
// the listener's ACCEPT each carry a challenge, a fresh 32-byte nonce and
// a CPace share made from the key, and both derive the session key ISK.
// Then each proves it holds ISK, the listener only after the dialer: the
// dialer's AUTH carries HMAC(kd, "dial", Nd, Nl, ids, name) and only a
// listener that checked it answers with HMAC(kl, "accept", ...), kd and kl
// derived from ISK for each direction, so neither proof can be reflected
// as the other. A share reveals nothing about the key, and neither side
// sends anything else computed from the key before it has the other's
// share, so a peer without the key (a dialer, or an impostor listener
// found under the name) tests one guess of the key per handshake, and none
// offline (version 2 of this handshake keyed the MACs with the key itself:
// the dialer's proof let an impostor listener test 137,000 guesses per
// second offline). Both shares are fresh, so no proof can be replayed into
// another handshake.
package auth

import (
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// ChallengeLen is the size of a challenge: a random nonce and a CPace
// share.
const ChallengeLen = randLen + cpaceShareLen

// MACLen is the size of a proof.
const MACLen = sha256.Size

// randLen is the size of a challenge's random nonce.
const randLen = 32

// Role names the side a proof is made by; it is the proof's label.
type Role string

// The two roles.
const (
	Dialer   Role = "dial"
	Listener Role = "accept"
)

// ErrBadChallenge says a peer's challenge was not a valid CPace share.
var ErrBadChallenge = errors.New("bad authentication challenge (a peer with another handshake version, or a low-order CPace share)")

// Handshake is one side's state in one keyed handshake with a listener
// name. It is not safe for concurrent use.
type Handshake struct {
	key    []byte
	nd, nl []byte // the dialer's and the listener's challenges: nonce ‖ CPace share
	name   string // the listener name, bound into the generator and the MACs
	listen bool   // this is the listener's side
	y      *ecdh.PrivateKey
	isk    []byte // the CPace session key, once both challenges are known
}

// Dial starts the dialer's side of a handshake with the listener name
// under key, and draws its challenge.
func Dial(key []byte, name string) *Handshake {
	h := &Handshake{key: key, name: name}
	h.nd = h.challenge()
	return h
}

// Accept starts the listener's side of a handshake under name and key, for
// the dialer's challenge nd (ChallengeLen bytes, or the proofs fail), and
// draws its own challenge.
func Accept(key []byte, name string, nd []byte) *Handshake {
	h := &Handshake{key: key, name: name, nd: nd, listen: true}
	h.nl = h.challenge()
	return h
}

// Challenge returns this side's challenge, to send to the peer.
func (h *Handshake) Challenge() []byte {
	if h.listen {
		return h.nl
	}
	return h.nd
}

// SetListenerChallenge gives the dialer's side the listener's challenge.
func (h *Handshake) SetListenerChallenge(nl []byte) {
	if !h.listen && h.isk == nil {
		h.nl = nl
	}
}

// challenge draws this side's nonce and CPace scalar and returns the
// challenge: nonce ‖ X25519(scalar, generator).
func (h *Handshake) challenge() []byte {
	b := make([]byte, ChallengeLen)
	if _, err := rand.Read(b[:randLen]); err != nil {
		panic("ucxnet: no randomness: " + err.Error())
	}
	y, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		panic("ucxnet: no randomness: " + err.Error())
	}
	h.y = y
	share, err := x25519With(y, cachedGenerator(h.key, h.name))
	if err != nil {
		// Only a generator of low order fails, and the map gives one only
		// for a key whose hash hits one of a dozen values.
		panic("ucxnet: CPace generator of low order: " + err.Error())
	}
	copy(b[randLen:], share)
	return b
}

// sessionKey returns ISK, computing it once the peer's challenge is known.
func (h *Handshake) sessionKey() ([]byte, error) {
	if h.isk != nil {
		return h.isk, nil
	}
	if len(h.nd) != ChallengeLen || len(h.nl) != ChallengeLen || h.y == nil {
		return nil, ErrBadChallenge
	}
	peer := h.nl[randLen:]
	if h.listen {
		peer = h.nd[randLen:]
	}
	k, err := x25519With(h.y, peer)
	if err != nil {
		return nil, ErrBadChallenge
	}
	h.isk = cpaceISK(nil, k, h.nd[randLen:], h.nd[:randLen], h.nl[randLen:], h.nl[:randLen])
	h.y = nil
	return h.isk, nil
}

// Proof returns role's MAC for the handshake between conns dialerID and
// listenerID, or ErrBadChallenge if the peer's challenge gives no session
// key.
func (h *Handshake) Proof(role Role, dialerID, listenerID uint64) ([]byte, error) {
	isk, err := h.sessionKey()
	if err != nil {
		return nil, err
	}
	return authMAC(isk, role, h.nd, h.nl, dialerID, listenerID, h.name), nil
}

// Verify reports whether mac is role's proof for the handshake between
// conns dialerID and listenerID.
func (h *Handshake) Verify(role Role, mac []byte, dialerID, listenerID uint64) bool {
	want, err := h.Proof(role, dialerID, listenerID)
	return err == nil && hmac.Equal(mac, want)
}

// roleKey derives the key one role proves with from the session key.
func roleKey(isk []byte, role Role) []byte {
	m := hmac.New(sha256.New, isk)
	m.Write([]byte("ucxnet/3 key " + role))
	return m.Sum(nil)
}

// authMAC is HMAC-SHA-256, under the role's own key, over the role, both
// challenges, both conn ids and the listener name.
func authMAC(isk []byte, role Role, nd, nl []byte, dialerID, listenerID uint64, name string) []byte {
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
