package session

import "time"

// Bucket is a token bucket: at most burst tokens, refilled at rate a
// second (both given to Take). The rate limits use it: endpoints made from
// CONNECTs, PING answers, and the log records a peer's input causes. Its
// zero value is full. It is not safe for concurrent use.
type Bucket struct {
	tokens float64
	at     time.Time // when tokens was last refilled (zero: never, full)
}

// Take takes a token at now and reports whether there was one.
func (b *Bucket) Take(now time.Time, burst, rate float64) bool {
	if b.Tokens(now, burst, rate) < 1 {
		return false
	}
	b.tokens--
	return true
}

// Tokens refills b at now and returns the tokens it holds.
func (b *Bucket) Tokens(now time.Time, burst, rate float64) float64 {
	if b.at.IsZero() {
		b.tokens, b.at = burst, now
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
		b.at = now
	}
	return b.tokens
}
