package progress

import (
	"testing"

	"github.com/ucxnet/ucxnet/internal/engine"
)

// BenchmarkBacklog is what a writer pays per backlog check: Backlog(ep),
// the read the write path makes, against Stats(ep).Backlog (which also
// looks up the endpoint's transports) and the engine-wide Backlog.
func BenchmarkBacklog(b *testing.B) {
	a, _, ep := connectedPair(b)
	b.Run("Backlog", func(b *testing.B) {
		for b.Loop() {
			_ = a.eng.Backlog(ep)
		}
	})
	b.Run("Stats", func(b *testing.B) {
		for b.Loop() {
			_ = a.eng.Stats(ep).Backlog
		}
	})
	b.Run("Engine", func(b *testing.B) {
		for b.Loop() {
			_ = a.eng.Backlog(engine.EP{})
		}
	})
}
