package auth

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A listener's challenge carrying a low-order share gives the dialer no
// session key, so it computes no proof; nor does a challenge of another
// length (an earlier handshake's 32-byte nonce).
func TestPSKCPaceLowOrderChallenge(t *testing.T) {
	for what, nl := range map[string][]byte{"low-order share": make([]byte, ChallengeLen), "32-byte nonce": make([]byte, 32)} {
		a := Dial([]byte("correct horse battery staple"), "x")
		a.SetListenerChallenge(nl)
		_, err := a.Proof(Dialer, 1, 2)
		require.ErrorIs(t, err, ErrBadChallenge, what)
		require.False(t, a.Verify(Listener, nil, 1, 2), what)
	}
}

// Two sides with the same key and name agree on the session key, and
// with different keys or names they do not.
func TestPSKCPaceAgreement(t *testing.T) {
	key := []byte("correct horse battery staple")
	for _, tc := range []struct {
		name          string
		lkey, lname   string
		wantAgreement bool
	}{{"same", string(key), "svc", true}, {"other key", "correct horse battery stapl3", "svc", false}, {"other name", string(key), "svc2", false}} {
		t.Run(tc.name, func(t *testing.T) {
			d := Dial(key, "svc")
			require.Len(t, d.Challenge(), ChallengeLen)
			l := Accept([]byte(tc.lkey), tc.lname, d.Challenge())
			require.Len(t, l.Challenge(), ChallengeLen)
			require.NotEqual(t, d.Challenge(), l.Challenge())
			d.SetListenerChallenge(l.Challenge())
			mac, err := d.Proof(Dialer, 1, 2)
			require.NoError(t, err)
			require.Len(t, mac, MACLen)
			require.Equal(t, tc.wantAgreement, l.Verify(Dialer, mac, 1, 2))
			require.False(t, l.Verify(Dialer, mac, 1, 3), "a proof for other conn ids")
			if tc.wantAgreement {
				lmac, err := l.Proof(Listener, 1, 2)
				require.NoError(t, err)
				require.True(t, d.Verify(Listener, lmac, 1, 2))
				require.False(t, d.Verify(Listener, mac, 1, 2), "the dialer's proof reflected")
			}
		})
	}
}

// Each handshake draws fresh challenges: a proof from one does not verify
// in another with the same key, name and conn ids.
func TestPSKFreshChallenges(t *testing.T) {
	key := []byte("correct horse battery staple")
	d := Dial(key, "svc")
	l := Accept(key, "svc", d.Challenge())
	d.SetListenerChallenge(l.Challenge())
	mac, err := d.Proof(Dialer, 1, 2)
	require.NoError(t, err)
	require.True(t, l.Verify(Dialer, mac, 1, 2))

	l2 := Accept(key, "svc", d.Challenge()) // the same CONNECT replayed
	require.NotEqual(t, l.Challenge(), l2.Challenge())
	require.False(t, l2.Verify(Dialer, mac, 1, 2), "a proof replayed into another handshake")
}
