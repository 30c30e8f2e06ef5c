package session

// Where a transport's listeners listen on kernel TCP when nothing says:
// loopback only while the registry is one no other host reads.

import (
	"fmt"
	"net"
	"strings"

	"github.com/ucxnet/ucxnet/registry"
)

// The reasons LaneDevices gives.
const (
	exposureSet    = "UCX_NET_DEVICES (Config.NetDevices) names them"
	exposureLocal  = "loopback only: the registry (%s) is local to this host, so no other host learns the endpoints; set UCX_NET_DEVICES (Config.NetDevices, --net-devices) to listen on others"
	exposureShared = "every interface: the registry (%s) is shared with other hosts; set UCX_NET_DEVICES (Config.NetDevices, --net-devices) to restrict it"
)

// LaneDevices returns where the transport's listeners listen on the
// kernel-TCP lane, in UCX_NET_DEVICES's syntax ("" for every interface),
// and why: the devices UCX_NET_DEVICES names when it is set; else, with a
// registry that only this host reads (a directory, the in-process memory
// registry), the loopback interface; else (a registry server, etcd)
// every interface, as UCX's tcp transport listens.
func (t *Transport) LaneDevices() (devices, why string) {
	if d := t.netDevices(); d != "" {
		return d, exposureSet
	}
	switch t.reg.(type) {
	case *registry.Dir, *registry.Memory:
		return loopbackDevices(), fmt.Sprintf(exposureLocal, t.reg)
	}
	return "", fmt.Sprintf(exposureShared, t.reg)
}

// loopbackDevices names the loopback interfaces that are up ("lo" on
// Linux), comma-separated.
func loopbackDevices() string {
	ifs, _ := net.Interfaces()
	var names []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 && ifc.Flags&net.FlagUp != 0 {
			names = append(names, ifc.Name)
		}
	}
	if len(names) == 0 {
		return "lo" // listens nowhere rather than everywhere
	}
	return strings.Join(names, ",")
}
