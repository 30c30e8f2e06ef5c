package session

import (
	"fmt"
	"os"
	"time"

	"github.com/ucxnet/ucxnet/internal/auth"
)

// Pre-shared-key authentication of the handshake: handshake.go has the
// frame sequence, internal/auth the key exchange (CPace) and the proofs.
// Keys are at least MinPSKLen bytes; a key file must belong to the user
// (or root) and must not be readable by group or others.

// EnvPSKFile names the environment variable holding the path of a file with
// the pre-shared key used when Dialer.PSK or ListenConfig.PSK is nil.
const EnvPSKFile = "UCXNET_PSK_FILE"

// MinPSKLen is the shortest pre-shared key accepted (a short key falls to
// brute force).
const MinPSKLen = 16

// authTimeout is how long a listener waits for a dialer's proof.
const authTimeout = 5 * time.Second

// authState is a conn's handshake authentication state.
type authState struct {
	hs      *auth.Handshake // nil without a pre-shared key
	name    string          // the listener name
	ln      *Listener       // the accepting listener (listener's side)
	proving bool            // dialer: AUTH sent, waiting for the listener's confirmation
	// connectFrom is the endpoint the CONNECT came from (listener's
	// side): once the dialer proves, its later CONNECTs there draw on a
	// proven share (hsbudget.go). Set before the conn is shared.
	connectFrom uintptr
}

// newDialAuth returns a dialer's authentication state for the listener
// name; with a key, its challenge is drawn.
func newDialAuth(psk []byte, name string) *authState {
	a := &authState{name: name}
	if psk != nil {
		a.hs = auth.Dial(psk, name)
	}
	return a
}

// newListenAuth returns the authentication state of a conn that ln (with
// a key) accepts under name, for the dialer's challenge nd
// (auth.ChallengeLen bytes, checked by the caller); it draws the
// listener's challenge.
func newListenAuth(psk []byte, name string, nd []byte, ln *Listener) *authState {
	return &authState{hs: auth.Accept(psk, name, nd), name: name, ln: ln}
}

// challenge returns this side's challenge, nil without a key.
func (a *authState) challenge() []byte {
	if a.hs == nil {
		return nil
	}
	return a.hs.Challenge()
}

// resolvePSK returns key, or the key in the file EnvPSKFile names, or nil.
func resolvePSK(key []byte) ([]byte, error) {
	what := "pre-shared key"
	if key == nil {
		path := os.Getenv(EnvPSKFile)
		if path == "" {
			return nil, nil
		}
		var err error
		if key, err = auth.ReadKeyFile(path); err != nil {
			return nil, fmt.Errorf("ucxnet: %w (%s)", err, EnvPSKFile)
		}
		what = "pre-shared key in " + path
	}
	if len(key) < MinPSKLen {
		return nil, fmt.Errorf("ucxnet: %s of %d bytes is too short (at least %d)", what, len(key), MinPSKLen)
	}
	return key, nil
}
