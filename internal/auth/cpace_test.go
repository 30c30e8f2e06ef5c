package auth

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// The CPace steps reproduce the test vectors of draft-irtf-cfrg-cpace
// (appendix "Test vector for CPace using group X25519 and hash SHA-512"):
// generator, both shares, K and the initiator-responder ISK.
func TestPSKCPaceVectors(t *testing.T) {
	require.Equal(t, "043132333401350003363738", hex.EncodeToString(lvCat([]byte("1234"), []byte("5"), nil, []byte("678"))))
	require.Equal(t, []byte{0xc8, 0x01}, prependLen(nil, make([]byte, 200))[:2])

	ci := unhex(t, "0b415f696e69746961746f720b425f726573706f6e646572")
	sid := unhex(t, "7e4b4791d6a8ef019b936c79fb7f2c57")
	require.Len(t, cpaceGeneratorString([]byte("Password"), ci, sid), 170)
	g := cpaceGenerator([]byte("Password"), ci, sid)
	require.Equal(t, "d04bf6d41f6a289632a2e929fa29bebd51092512a7829fdde7d314b62f05a73f", hex.EncodeToString(g))

	ya := unhex(t, "21b4f4bd9e64ed355c3eb676a28ebedaf6d8f17bdc365995b319097153044080")
	yb := unhex(t, "848b0779ff415f0af4ea14df9dd1d3c29ac41d836c7808896c4eba19c51ac40a")
	Ya, err := x25519(ya, g)
	require.NoError(t, err)
	require.Equal(t, "1d13c89278cdadd826f6d8d7f887701430f8380ddc17611cdd6dc989ce0c9f32", hex.EncodeToString(Ya))
	Yb, err := x25519(yb, g)
	require.NoError(t, err)
	require.Equal(t, "248cccf6d5cdc3646f0ad593f9e6cef4e69d4945f8372e623512ecea32185623", hex.EncodeToString(Yb))
	ka, err := x25519(ya, Yb)
	require.NoError(t, err)
	kb, err := x25519(yb, Ya)
	require.NoError(t, err)
	require.Equal(t, ka, kb)
	require.Equal(t, "5b067effbdc0b2a0e1d907b21ebb25cfedb96a852179a847c37e43ee71322c6b", hex.EncodeToString(ka))
	isk := cpaceISK(sid, ka, Ya, []byte("ADa"), Yb, []byte("ADb"))
	require.Equal(t, "6e19b875f7a561d6b3ca3dbb9ef42ac55de3e717881018204b8922b4d5e53bb2"+
		"aa82c300bea7b65d2b671da71922ddf6472301b79bc270adfa8bf413285f2263", hex.EncodeToString(isk))
}

// A share that is a low-order point (of the curve or its twist, also with
// bit 255 set) fails the exchange, as the draft requires; others give the
// draft's results.
func TestPSKCPaceLowOrderShares(t *testing.T) {
	s := unhex(t, "af46e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449aff")
	for _, u := range []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
		"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	} {
		_, err := x25519(s, unhex(t, u))
		require.Error(t, err, "low-order share %s", u)
	}
	for u, q := range map[string]string{
		"daffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff": "d8e2c776bbacd510d09fd9278b7edcd25fc5ae9adfba3b6e040e8d3b71b21806",
		"dbffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff": "c85c655ebe8be44ba9c0ffde69f2fe10194458d137f09bbff725ce58803cdb38",
		"cdeb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b880": "e062dcd5376d58297be2618c7498f55baa07d7e03184e8aada20bca28888bf7a",
	} {
		k, err := x25519(s, unhex(t, u))
		require.NoError(t, err)
		require.Equal(t, q, hex.EncodeToString(k))
	}
}
