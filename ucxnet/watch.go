package ucxnet

import (
	"os"

	"github.com/ucxnet/ucxnet/internal/cloexec"
	"github.com/ucxnet/ucxnet/internal/progress"
)

// EnvNoCloexec names the environment variable that, set to "1", keeps
// ucxnet from marking the descriptors UCX creates close-on-exec (Linux;
// see README, "Descriptors and exec"). Read once, when the package is
// initialised.
const EnvNoCloexec = "UCXNET_NO_CLOEXEC"

// fdSweep marks UCX's descriptors close-on-exec, for every Transport of
// the process: when a worker is created, after each endpoint is made (a
// dial, a CONNECT) and when an ACCEPT arrives (UCX's async thread accepts
// tcp connections on its own), before the dial or the Accept returns; and
// at each engine tick for a second after, since UCX makes more sockets
// while it wires the endpoint up.
var fdSweep = cloexec.New(os.Getenv(EnvNoCloexec) == "1")

// markUCXFDs has UCX's new descriptors marked close-on-exec if t runs UCX:
// after its worker is made, an endpoint is created, or a peer's handshake
// arrived (UCX accepted its connection).
func (t *Transport) markUCXFDs() {
	if _, ok := t.eng.(*progress.Engine); ok {
		fdSweep.Request()
	}
}
