package auth

import (
	"crypto/ecdh"
	"crypto/sha256"
	"crypto/sha512"
	"math/big"
	"slices"
	"sync"
)

// CPace, the balanced password-authenticated key exchange of
// draft-irtf-cfrg-cpace, in its X25519/SHA-512 suite ("CPace255"), on the
// standard library alone (crypto/ecdh for X25519, math/big for the
// Elligator 2 map). It checks against the draft's test vectors
// (TestPSKCPaceVectors).
//
// Both sides map the pre-shared key to a generator g of Curve25519 whose
// discrete logarithm nobody knows, draw a fresh scalar y and send
// Y = X25519(y, g); each computes K = X25519(y, Y of the other side), and
// the session key ISK hashes K with both shares. A peer without the key
// learns nothing it can test guesses against offline: with a share made
// from a guessed key it tests that one guess, and only by completing the
// handshake. Handshake proves knowledge of ISK.
// cpaceDSI is the suite's domain separation string.
const cpaceDSI = "CPace255"

// cpaceShareLen is the size of a share, an X25519 u-coordinate.
const cpaceShareLen = 32

var (
	p25519  = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	pMinus1 = new(big.Int).Sub(p25519, big.NewInt(1))
	a25519  = big.NewInt(486662)
)

// prependLen appends s to b, prefixed with its length in LEB128.
func prependLen(b, s []byte) []byte {
	n := len(s)
	for {
		if n < 128 {
			b = append(b, byte(n))
		} else {
			b = append(b, byte(n&0x7f|0x80))
		}
		n >>= 7
		if n == 0 {
			break
		}
	}
	return append(b, s...)
}

// lvCat is the draft's lv_cat: each part prefixed with its length.
func lvCat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = prependLen(b, p)
	}
	return b
}

// cpaceGeneratorString is the draft's generator_string for SHA-512 (a
// 128-byte block): DSI and key zero-padded to fill the first block, then
// the channel identifier and the session id.
func cpaceGeneratorString(prs, ci, sid []byte) []byte {
	zpad := max(0, sha512.BlockSize-1-len(prependLen(nil, prs))-len(prependLen(nil, []byte(cpaceDSI))))
	return lvCat([]byte(cpaceDSI), prs, make([]byte, zpad), ci, sid)
}

// cpaceGenerator maps a key (prs) to a generator: SHA-512 of the generator
// string, its first 32 bytes as a little-endian field element (bit 255
// cleared), mapped to the curve with Elligator 2. It runs in variable time
// (math/big); cachedGenerator runs it once per key and name.
func cpaceGenerator(prs, ci, sid []byte) []byte {
	h := sha512.Sum512(cpaceGeneratorString(prs, ci, sid))
	u := h[:32]
	u[31] &= 0x7f
	r := new(big.Int).SetBytes(reversed(u))
	x := elligator2(r.Mod(r, p25519))
	out := make([]byte, 32)
	x.FillBytes(out)
	return reversed(out)
}

// elligator2 is map_to_curve_elligator2 of RFC 9380 for Curve25519
// (A = 486662, B = 1, Z = 2), returning the u-coordinate.
func elligator2(r *big.Int) *big.Int {
	p := p25519
	tv1 := new(big.Int).Mul(r, r)
	tv1.Lsh(tv1, 1).Mod(tv1, p) // Z·r²
	if tv1.Cmp(pMinus1) == 0 {
		tv1.SetInt64(0)
	}
	x1 := new(big.Int).Add(tv1, big.NewInt(1))
	x1.ModInverse(x1, p)
	x1.Mul(x1, a25519).Neg(x1).Mod(x1, p) // −A / (1 + Z·r²)
	gx1 := new(big.Int).Add(x1, a25519)
	gx1.Mul(gx1, x1).Add(gx1, big.NewInt(1)).Mul(gx1, x1).Mod(gx1, p) // x1³ + A·x1² + x1
	if big.Jacobi(gx1, p) >= 0 {
		return x1
	}
	x2 := new(big.Int).Add(x1, a25519)
	return x2.Neg(x2).Mod(x2, p) // −x1 − A
}

func reversed(b []byte) []byte {
	r := slices.Clone(b)
	slices.Reverse(r)
	return r
}

// x25519 is the draft's scalar_mult_vfy: X25519(y, u), failing where the
// result is the neutral element (u a low-order point of the curve or its
// twist: crypto/ecdh refuses an all-zero result).
func x25519(y, u []byte) ([]byte, error) {
	priv, err := ecdh.X25519().NewPrivateKey(y)
	if err != nil {
		return nil, err
	}
	return x25519With(priv, u)
}

// x25519With is x25519 with a scalar held as a private key (making one
// costs a multiplication of its own, for its public key).
func x25519With(priv *ecdh.PrivateKey, u []byte) ([]byte, error) {
	pub, err := ecdh.X25519().NewPublicKey(u)
	if err != nil {
		return nil, err
	}
	return priv.ECDH(pub)
}

// cpaceISK is the draft's ISK for the initiator-responder transcript:
// SHA-512(lv_cat(DSI‖"_ISK", sid, K) ‖ lv_cat(Ya, ADa) ‖ lv_cat(Yb, ADb)).
func cpaceISK(sid, k, ya, ada, yb, adb []byte) []byte {
	b := lvCat([]byte(cpaceDSI+"_ISK"), sid, k)
	b = append(b, lvCat(ya, ada)...)
	b = append(b, lvCat(yb, adb)...)
	h := sha512.Sum512(b)
	return h[:]
}

// maxCachedGenerators bounds the generator cache (one entry per key and
// listener name in use; it starts afresh when full).
const maxCachedGenerators = 256

var generators struct {
	sync.Mutex
	m map[[sha256.Size]byte][]byte
}

// cachedGenerator returns the generator for psk and a listener name (the
// channel identifier "ucxnet/3" ‖ name, no session id). The variable-time
// map runs once per key and name, not per handshake, so a peer cannot time
// it over and over.
func cachedGenerator(psk []byte, name string) []byte {
	ci := lvCat([]byte("ucxnet/3"), []byte(name))
	id := sha256.Sum256(lvCat(psk, ci))
	generators.Lock()
	defer generators.Unlock()
	if g, ok := generators.m[id]; ok {
		return g
	}
	if generators.m == nil || len(generators.m) >= maxCachedGenerators {
		generators.m = make(map[[sha256.Size]byte][]byte)
	}
	g := cpaceGenerator(psk, ci, nil)
	generators.m[id] = g
	return g
}
