package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/ucxnet/ucxnet/ucxnet"
)

var versionCmd = &command{
	Name:  "version",
	Short: "print the ucxnet, Go and UCX versions (also --version)",
	Long: `Version prints the module version of this build (from the Go build
information: "(devel)" for a build from a work tree, with its VCS revision
as Go recorded it or as make build stamped it), the Go release that built it, and the UCX release
loaded and the one ucxnet was built against.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		return func(_ context.Context, sio *stdio, args []string) error {
			if len(args) != 0 {
				return usagef("takes no arguments, got %d", len(args))
			}
			printVersion(sio.Out)
			return nil
		}
	},
}

// commit is the revision `make build` stamps (-ldflags "-X
// main.commit=..."), for builds where Go records none (-buildvcs=false, a
// tree without .git).
var commit string

// printVersion writes the version lines of "ucxnet version".
func printVersion(w io.Writer) {
	mod, rev, dirty := "unknown", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		mod = bi.Main.Version
		if mod == "" {
			mod = "(devel)"
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev != "" && dirty {
		rev += "+modified"
	}
	if rev == "" {
		rev = commit
	}
	fmt.Fprintf(w, "ucxnet %s", mod)
	if rev != "" {
		fmt.Fprintf(w, " (revision %s)", rev)
	}
	fmt.Fprintf(w, "\nbuilt with %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	l := ucxnet.UCX()
	if l.Version == "" {
		fmt.Fprintf(w, "UCX none in this build (no cgo, or not Linux)\n")
		return
	}
	fmt.Fprintf(w, "UCX %s loaded, built against %s\n", l.Version, l.BuiltFor)
	if warn := l.Warning(); warn != "" {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}
