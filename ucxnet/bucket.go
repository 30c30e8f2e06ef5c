package ucxnet

// The token bucket of the rate limits: endpoints made from CONNECTs
// (admit.go), PING answers (peer.go), and the log records a peer's input
// causes (logger.go).

import "time"

// bucket is a token bucket: at most burst tokens, refilled at rate a
// second (both given to take). Its zero value is full.
type bucket struct {
	tokens float64
	at     time.Time // when tokens was last refilled (zero: never, full)
}

// take takes a token at now and reports whether there was one.
func (b *bucket) take(now time.Time, burst, rate float64) bool {
	if b.at.IsZero() {
		b.tokens, b.at = burst, now
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
