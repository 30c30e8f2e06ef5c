package session

// Where a transport's listeners listen on kernel TCP when nothing says:
// loopback only while the registry is one no other host reads.

import (
	"net"
	"strings"
)

// The reasons LaneDevices gives.
const (
	exposureSet    = "UCX_NET_DEVICES (Config.NetDevices) names them"
	exposureLocal  = "loopback only: the registry (%s) is local to this host, so no other host learns the endpoints; set UCX_NET_DEVICES (Config.NetDevices, --net-devices) to listen on others"
	exposureShared = "every interface: the registry (%s) is shared with other hosts; set UCX_NET_DEVICES (Config.NetDevices, --net-devices) to restrict it"
)

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
