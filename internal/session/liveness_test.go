package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The sweep's verdicts over a peer's silence, on a made-up clock.
func TestJudge(t *testing.T) {
	const ka = 12 * time.Second
	t0 := time.Unix(1000, 0)
	never := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name string
		l    Liveness
		now  time.Time
		want Verdict
	}{
		{"keepalive off", Liveness{KeepAlive: 0, LastRecv: t0, LastPing: never}, at(time.Hour), Alive},
		{"dialer, heard within half", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: never}, at(ka / 2), Alive},
		{"dialer, silent past half", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: never}, at(ka/2 + time.Millisecond), Probe},
		{"listener waits three quarters", Liveness{KeepAlive: ka, LastRecv: t0, LastPing: never}, at(ka/2 + time.Second), Alive},
		{"listener, silent past three quarters", Liveness{KeepAlive: ka, LastRecv: t0, LastPing: never}, at(ka*3/4 + time.Millisecond), Probe},
		{"probed lately: wait for the answer", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: at(ka * 3 / 4)}, at(ka*3/4 + ka/12), Alive},
		{"unanswered past a sixth: probe again", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: at(ka / 2)}, at(ka/2 + ka/6), Probe},
		{"silent past KeepAlive, probe unanswered", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: at(ka - time.Second)}, at(ka + time.Second), Dead},
		{"silent past KeepAlive, probe just sent", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: at(ka)}, at(ka + time.Second), Alive},
		{"silent past KeepAlive, never probed", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: never}, at(2 * ka), Probe},
		{"a probe before the last sign of life", Liveness{KeepAlive: ka, Dialer: true, LastRecv: t0, LastPing: at(-time.Second)}, at(2 * ka), Probe},
	} {
		require.Equal(t, tc.want, Judge(tc.l, tc.now), tc.name)
	}
}

// After a stall, a peer silent for longer than KeepAlive is probed, not
// failed.
func TestStallFloor(t *testing.T) {
	const ka = 12 * time.Second
	now := time.Unix(5000, 0)
	floor := StallFloor(now, ka)
	require.True(t, now.Sub(floor) > ka/2 && now.Sub(floor) < ka*3/4)
	l := Liveness{KeepAlive: ka, Dialer: true, LastRecv: floor, LastPing: time.Unix(0, 0)}
	require.Equal(t, Probe, Judge(l, now))
}
