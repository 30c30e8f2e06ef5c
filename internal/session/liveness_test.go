package session

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The sweep's verdicts over a peer's silence, on a made-up clock: TCP's
// shape (idle, then a probe every interval, dead after count of them).
func TestJudge(t *testing.T) {
	k := KeepAlive{Idle: 12 * time.Second, Interval: 4 * time.Second, Count: 3}
	t0 := time.Unix(1000, 0)
	never := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	dead := k.Idle + 3*k.Interval
	for _, tc := range []struct {
		name string
		l    Liveness
		now  time.Time
		want Verdict
	}{
		{"keepalive off", Liveness{LastRecv: t0, LastPing: never}, at(time.Hour), Alive},
		{"dialer, heard within idle", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: never}, at(k.Idle), Alive},
		{"dialer, silent past idle", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: never}, at(k.Idle + time.Millisecond), Probe},
		{"listener waits half an interval more", Liveness{KeepAlive: k, LastRecv: t0, LastPing: never}, at(k.Idle + time.Second), Alive},
		{"listener, silent past that", Liveness{KeepAlive: k, LastRecv: t0, LastPing: never}, at(k.Idle + k.Interval/2 + time.Millisecond), Probe},
		{"probed lately: wait for the answer", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: at(k.Idle)}, at(k.Idle + time.Second), Alive},
		{"unanswered for an interval: probe again", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: at(k.Idle)}, at(k.Idle + k.Interval), Probe},
		{"count intervals unanswered", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: at(dead - k.Interval/2)}, at(dead + time.Millisecond), Dead},
		{"not before count intervals", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: at(dead - 2*k.Interval)}, at(dead - time.Millisecond), Probe},
		{"past the end, probe just sent", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: at(dead)}, at(dead + time.Millisecond), Alive},
		{"past the end, never probed", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: never}, at(2 * dead), Probe},
		{"a probe before the last sign of life", Liveness{KeepAlive: k, Dialer: true, LastRecv: t0, LastPing: at(-time.Second)}, at(2 * dead), Probe},
	} {
		require.Equal(t, tc.want, Judge(tc.l, tc.now), tc.name)
	}
}

// After a stall, a peer silent for longer than its whole timeout is
// probed, not failed.
func TestStallFloor(t *testing.T) {
	k := keepAliveOf(12 * time.Second)
	now := time.Unix(5000, 0)
	floor := StallFloor(now, k)
	l := Liveness{KeepAlive: k, Dialer: true, LastRecv: floor, LastPing: time.Unix(0, 0)}
	require.Equal(t, Probe, Judge(l, now))
	l.LastPing = now
	require.NotEqual(t, Dead, Judge(l, now.Add(k.Interval*time.Duration(k.Count)-time.Second)), "it has its count of intervals to answer")
}

// Keepalive settings take net.KeepAliveConfig's shape and defaults, and a
// peer is judged by its conns' tightest.
func TestKeepAliveShape(t *testing.T) {
	require.Equal(t, KeepAlive{Idle: 15 * time.Second, Interval: 15 * time.Second, Count: 9}, keepAliveOf(DefaultKeepAlive))
	require.Equal(t, 150*time.Second, keepAliveOf(DefaultKeepAlive).Timeout(), "Go's default: 15 s idle, then 9 probes 15 s apart")
	require.False(t, keepAliveOf(-1).On())
	require.False(t, keepAliveConfig(net.KeepAliveConfig{Idle: time.Second}).On(), "Enable false: off")
	require.Equal(t, KeepAlive{Idle: time.Second, Interval: DefaultKeepAlive, Count: 2},
		keepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Second, Count: 2}))
	a, b := KeepAlive{Idle: time.Second, Interval: 5 * time.Second, Count: 9}, KeepAlive{Idle: 3 * time.Second, Interval: time.Second, Count: 2}
	require.Equal(t, KeepAlive{Idle: time.Second, Interval: time.Second, Count: 2}, a.tightest(b))
	require.Equal(t, a, a.tightest(KeepAlive{}))
	require.Equal(t, 3*time.Second, answerWait(keepAliveOf(DefaultKeepAlive)), "a dial's answer wait stays short")
}
