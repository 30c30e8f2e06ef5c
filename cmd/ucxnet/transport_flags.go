package main

import (
	"strings"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

// netDevicesUsage is the help text of --net-devices.
const netDevicesUsage = "UCX `devices` to use, comma-separated, e.g. eth0 or lo,mlx5_0:1 (UCX_NET_DEVICES; default all, and UCX's tcp transport then listens on every interface)"

// newTransport returns the transport a command uses: the default one when
// netDevices is empty and reg nil, else a new one with UCX setting
// NET_DEVICES=netDevices (when given) and registry reg (nil: from the
// environment). The caller closes it.
func newTransport(netDevices string, reg registry.Registry) (*ucxnet.Transport, error) {
	netDevices = strings.TrimSpace(netDevices)
	if netDevices == "" && reg == nil {
		return ucxnet.DefaultTransport()
	}
	cfg := ucxnet.Config{Registry: reg}
	if netDevices != "" {
		cfg.UCX = map[string]string{"NET_DEVICES": netDevices}
	}
	return ucxnet.NewTransport(cfg)
}

// listeningSummary lists this process's listening TCP sockets on one
// line, or says why it cannot.
func listeningSummary() string {
	addrs, err := listeningTCP()
	switch {
	case err != nil:
		return "unknown (" + err.Error() + ")"
	case len(addrs) == 0:
		return "none"
	}
	return strings.Join(addrs, " ")
}
