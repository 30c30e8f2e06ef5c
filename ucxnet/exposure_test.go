package ucxnet

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/registry"
)

// sharedRegistry is a memory registry that does not say it is local, as
// a registry server's client would not.
type sharedRegistry struct{ registry.Registry }

// A listener's kernel-TCP lane listens on loopback only when the registry
// is local to the host (nothing else learns its endpoints), on every
// interface with a shared registry, and where NetDevices says when set.
func TestLaneExposureFollowsRegistry(t *testing.T) {
	endpoints := func(t *testing.T, cfg Config) ([]netip.AddrPort, string) {
		tr := newMemTransport(t, memengine.NewNetwork(), cfg)
		defer tr.Close()
		lc := ListenConfig{Transport: tr}
		ln, err := lc.Listen(context.Background(), Network, "")
		require.NoError(t, err)
		defer ln.Close()
		e, err := cfg.Registry.Resolve(context.Background(), ln.Addr().String())
		require.NoError(t, err)
		var eps []netip.AddrPort
		for _, s := range strings.Split(e.Meta[MetaTCP], ",") {
			if ap, err := netip.ParseAddrPort(strings.TrimSpace(s)); err == nil {
				eps = append(eps, ap)
			}
		}
		_, why := tr.LaneDevices()
		return eps, why
	}
	base := Config{Lane: LaneTCP, StatsDir: StatsOff}

	local := base
	local.Registry = registry.NewMemory()
	eps, why := endpoints(t, local)
	require.NotEmpty(t, eps)
	for _, ap := range eps {
		require.True(t, ap.Addr().IsLoopback(), "local registry: endpoint %v is not loopback (%s)", ap, why)
	}
	require.Contains(t, why, "loopback only")

	shared := base
	shared.Registry = sharedRegistry{registry.NewMemory()}
	eps, why = endpoints(t, shared)
	require.Contains(t, why, "every interface")
	other := false
	for _, ap := range eps {
		other = other || !ap.Addr().IsLoopback()
	}
	if !other {
		t.Skipf("this host has no address but loopback: endpoints %v", eps)
	}

	set := local
	set.Registry = registry.NewMemory()
	set.NetDevices = "lo"
	_, why = endpoints(t, set)
	require.Contains(t, why, "UCX_NET_DEVICES")
}
