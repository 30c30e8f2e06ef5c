// Command ucxnet is the command-line companion of the ucxnet library: a
// demo of HTTP over UCX between two processes, a look at what UCX offers on
// this host, a netcat-like tool, a TCP↔ucxnet proxy, benchmarks against
// Go's TCP loopback, and a registry server.
//
//	ucxnet demo             HTTP over ucxnet vs Go's TCP loopback
//	ucxnet info [NAME]      UCX version, transports, settings, listening addresses, registry
//	ucxnet cat -l NAME      accept one conn; conn→stdout, stdin→conn
//	ucxnet cat NAME         dial NAME; stdin→conn, conn→stdout
//	ucxnet proxy            forward conns between TCP and ucxnet (--listen, --to, --max-conns)
//	ucxnet bench            ucxnet vs Go TCP (and unix sockets): round trips and streams, cross-process
//	ucxnet registry         serve the HTTP name registry (token by default, optional TLS)
//	ucxnet psk FILE         write a new random pre-shared key (mode 0600)
//	ucxnet ls               live conns and listeners of this user's processes (alias ss)
//	ucxnet version          ucxnet, Go and UCX versions (also --version)
//	ucxnet help [COMMAND]   usage
//
// Every command takes --help. Errors are reported as
// "ucxnet: COMMAND: ERROR" on stderr with exit status 1; a usage error
// (a bad flag or argument) is one line, followed by the command's synopsis
// and a pointer to "ucxnet help COMMAND", with exit status 2; an unknown
// command prints the command list, also with exit status 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ucxnet/ucxnet/ucxnet"
)

// command is one subcommand.
type command struct {
	// Name is the word on the command line.
	Name string
	// Args is the synopsis of the arguments after the flags, e.g. "[NAME]".
	Args string
	// Short is the one-line description in the command list.
	Short string
	// Long is printed under the synopsis by "ucxnet CMD --help".
	Long string
	// Hidden commands are left out of the command list (internal use).
	Hidden bool
	// Setup registers the command's flags on fs and returns the function
	// that runs it with the positional arguments that remain after parsing.
	// Returning a usageError from run makes the dispatcher print the usage
	// and exit 2.
	Setup func(fs *flag.FlagSet) (run func(ctx context.Context, io *stdio, args []string) error)
}

// stdio is where a command reads and writes.
type stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// usageError is a command-line error: wrong number of arguments and the
// like. It leads to the usage text and exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// commands is the table of subcommands, in the order "ucxnet help" lists
// them. To add one (e.g. bench), write its *command in its own file and
// add it here.
var commands = []*command{
	demoCmd,
	infoCmd,
	catCmd,
	proxyCmd,    // cmd/ucxnet/proxy.go: TCP <-> ucxnet bridge
	benchCmd,    // cmd/ucxnet/bench.go: `make bench` runs `ucxnet bench`.
	registryCmd, // cmd/ucxnet/registry_cmd.go: HTTP registry server
	pskCmd,      // cmd/ucxnet/psk.go: a random pre-shared key file
	lsCmd,       // cmd/ucxnet/ls.go: live conns and listeners of this user's processes
	ssCmd,       // hidden: ls under the name ss
	versionCmd,  // cmd/ucxnet/version.go: also --version

	demoServerCmd,  // hidden: the child process of demo
	benchServerCmd, // hidden: the child process of bench
	benchIdleCmd,   // hidden: a client process of bench's requests after idle
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches args (without the program name) and returns the exit
// status.
func run(ctx context.Context, sio *stdio, args []string) int {
	if len(args) == 0 {
		printUsage(sio.Err)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if name == "help" && len(rest) > 0 {
			c := lookup(rest[0])
			if c == nil {
				fmt.Fprintf(sio.Err, "ucxnet: help: unknown command %q\n", rest[0])
				printUsage(sio.Err)
				return 2
			}
			fs := newFlagSet(c, sio.Err)
			c.Setup(fs)
			printCommandUsage(sio.Out, c, fs)
			return 0
		}
		printUsage(sio.Out)
		return 0
	case "--version", "-version", "-V":
		name = versionCmd.Name
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(sio.Err, "ucxnet: unknown command %q\n", name)
		printUsage(sio.Err)
		return 2
	}
	fs := newFlagSet(c, io.Discard)
	runFn := c.Setup(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(sio.Out, c, fs)
			return 0
		}
		printUsageError(sio.Err, c, fs, err)
		return 2
	}
	if err := runFn(ctx, sio, fs.Args()); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			printUsageError(sio.Err, c, fs, err)
			return 2
		}
		fmt.Fprintf(sio.Err, "ucxnet: %s: %v\n", c.Name, err)
		return 1
	}
	return 0
}

// newFlagSet returns the FlagSet of c: errors go to errOut (the
// dispatcher passes io.Discard and reports them itself), and the
// dispatcher prints usage itself.
func newFlagSet(c *command, errOut io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ucxnet "+c.Name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {}
	return fs
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "ucxnet: net.Conn over UCX (RDMA, shared memory, TCP)\n\n")
	fmt.Fprintf(w, "Usage:\n  ucxnet COMMAND [FLAGS] [ARGS]\n\nCommands:\n")
	var list []*command
	for _, c := range commands {
		if !c.Hidden {
			list = append(list, c)
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	for _, c := range list {
		syn := c.Name
		if c.Args != "" {
			syn += " " + c.Args
		}
		fmt.Fprintf(w, "  %-22s %s\n", syn, c.Short)
	}
	fmt.Fprintf(w, "  %-22s %s\n", "help [COMMAND]", "show this list, or a command's usage")
	fmt.Fprintf(w, "\nRun \"ucxnet COMMAND --help\" for a command's flags.\n")
	fmt.Fprintf(w, "Environment: UCX_* configures UCX (e.g. UCX_TLS=tcp, UCX_TLS=sm);\n")
	fmt.Fprintf(w, "UCXNET_REGISTRY selects the name registry (dir:/path, mem:, http(s)://host:port);\n")
	fmt.Fprintf(w, "UCX_NET_DEVICES (or --net-devices) limits the interfaces UCX uses and listens on.\n")
}

// printUsageError reports a bad flag or argument of c in two lines: the
// error, then the synopsis and where the full usage is.
func printUsageError(w io.Writer, c *command, fs *flag.FlagSet, err error) {
	fmt.Fprintf(w, "ucxnet: %s: %v\n", c.Name, err)
	fmt.Fprintf(w, "Usage: %s (run 'ucxnet help %s' for more)\n", synopsis(c, fs), c.Name)
}

// synopsis is c's command line: "ucxnet NAME [FLAGS] ARGS".
func synopsis(c *command, fs *flag.FlagSet) string {
	syn := "ucxnet " + c.Name
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		syn += " [FLAGS]"
	}
	if c.Args != "" {
		syn += " " + c.Args
	}
	return syn
}

func printCommandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	fmt.Fprintf(w, "Usage: %s\n\n", synopsis(c, fs))
	long := c.Long
	if long == "" {
		long = c.Short
	}
	fmt.Fprintf(w, "%s\n", strings.TrimRight(long, "\n"))
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// closeTransport closes t after waiting up to linger for its peers to go
// away (their processes exit or close their endpoints).
//
// Why: when a process exits, its peers see a UCX endpoint failure, and
// ucxnet fails every conn on that endpoint at once, dropping frames still
// in flight — the last data and FIN this process wrote may be lost,
// although the writes returned. Waiting until the peer has gone (it has
// then read everything it wanted) or for a short while avoids that. A
// conn closed before this must have finished reading (Close after EOF),
// or Transport.Close resets it.
func closeTransport(t *ucxnet.Transport, linger time.Duration) {
	deadline := time.Now().Add(linger)
	for t.Stats().Peers > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	t.Close()
}
