package ucxnet

import (
	"os"

	"github.com/ucxnet/ucxnet/internal/progress"
)

// EnvNoCloexec names the environment variable that, set to "1", keeps
// ucxnet from marking the descriptors UCX creates close-on-exec (Linux;
// see README, "Descriptors and exec"). Read once, when the package is
// initialised.
const EnvNoCloexec = "UCXNET_NO_CLOEXEC"

// noCloexec reports whether EnvNoCloexec turns the sweep off.
func noCloexec() bool { return os.Getenv(EnvNoCloexec) == "1" }

// markUCXFDs has UCX's new descriptors marked close-on-exec
// (cloexec_linux.go) if t runs UCX: after its worker is made, an endpoint
// is created, or a peer's handshake arrived (UCX accepted its connection).
func (t *Transport) markUCXFDs() {
	if _, ok := t.eng.(*progress.Engine); ok {
		fdSweep.request()
	}
}
