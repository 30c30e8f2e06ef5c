package ucxnet

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"time"
)

// Pre-shared-key authentication of the handshake.
//
// UCX authenticates nothing. With a key on both sides the handshake becomes
// a mutual challenge-response:
//
//	dialer   → CONNECT  Hello{Nonce: Nd}
//	listener → ACCEPT   Hello{Nonce: Nl, MAC: HMAC(k, "accept", Nd, Nl, ids, name)}
//	dialer   → AUTH     Hello{MAC: HMAC(k, "dial", Nd, Nl, ids, name)}
//	listener → AUTH     (FlagReply): the conn is accepted
//
// Both nonces are fresh random values, so neither side's proof can be
// replayed into another handshake. A listener refuses (REFUSE, RefuseAuth)
// a dialer whose proof is wrong or missing; a dialer with a key refuses a
// listener that cannot prove it knows the same key.

// EnvPSKFile names the environment variable holding the path of a file with
// the pre-shared key used when Dialer.PSK or ListenConfig.PSK is nil.
const EnvPSKFile = "UCXNET_PSK_FILE"

const (
	nonceLen    = 32
	authTimeout = 10 * time.Second // a listener waits this long for a dialer's proof
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
		if len(key) == 0 {
			return nil, fmt.Errorf("ucxnet: empty pre-shared key")
		}
		return key, nil
	}
	path := os.Getenv(EnvPSKFile)
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ucxnet: reading pre-shared key (%s): %w", EnvPSKFile, err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return nil, fmt.Errorf("ucxnet: pre-shared key file %s is empty", path)
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

// authMAC is HMAC-SHA-256 over the role, both nonces, both conn ids and the
// listener name.
func authMAC(psk []byte, role string, nd, nl []byte, dialerID, listenerID uint64, name string) []byte {
	m := hmac.New(sha256.New, psk)
	m.Write([]byte("ucxnet/1 " + role + "\x00"))
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
