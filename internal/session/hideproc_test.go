package session

import (
	"os"

	"github.com/ucxnet/ucxnet/internal/stream"
)

// hideProcEnv, set to "1" in a test's child process, makes its Hellos name
// no process: a stopped child is then taken for dead, as a peer on another
// host would be.
const hideProcEnv = "UCXNET_TEST_HIDE_PROC"

func init() {
	if os.Getenv(hideProcEnv) == "1" {
		selfProc = func() stream.ProcID { return stream.ProcID{} }
	}
}
