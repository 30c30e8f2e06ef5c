package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ucxnet/ucxnet/registry"
	"github.com/ucxnet/ucxnet/ucxnet"
)

var infoCmd = &command{
	Name:  "info",
	Args:  "[NAME]",
	Short: "show UCX version, transports, settings and registry; probe NAME",
	Long: `Info shows the UCX library version, the transports and devices UCX offers
on this host (from "ucx_info -d"), the UCX settings ucxnet changes, the
UCX_* variables set in the environment and the registry in use.

It then starts a UCX worker (as any ucxnet program does) and prints the TCP
addresses this process listens on: UCX's tcp transport listens on every
interface it may use, so any host that can reach one of them can connect
to the worker. --net-devices (UCX_NET_DEVICES) restricts the devices.

With NAME it also resolves NAME in the registry, prints the entry and the
lane a dial takes (UCX, or a kernel TCP connection where UCX would only
have tcp) and why, dials it and prints which transports carry the conn,
then closes the conn.`,
	Setup: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) error {
		timeout := fs.Duration("timeout", 10*time.Second, "dial `timeout` for NAME")
		netDevices := fs.String("net-devices", "", netDevicesUsage)
		return func(ctx context.Context, sio *stdio, args []string) error {
			if len(args) > 1 {
				return usagef("at most one NAME, got %d arguments", len(args))
			}
			return runInfo(ctx, sio, args, *timeout, *netDevices)
		}
	},
}

func runInfo(ctx context.Context, sio *stdio, args []string, timeout time.Duration, netDevices string) error {
	// The registry and the worker first: a setting that stops them (a bad
	// UCX_TLS, an unreadable registry) is the one error printed, not the
	// end of half a report.
	reg, err := registry.FromEnv()
	if err != nil {
		return fmt.Errorf("opening registry: %w", err)
	}
	t, err := newTransport(netDevices, reg)
	if err != nil {
		return fmt.Errorf("starting a UCX worker: %w", err)
	}
	defer t.Close() // probe closes it first, gracefully; a second Close just fails
	w := sio.Out
	printUCXLibrary(w)

	fmt.Fprintf(w, "\nTransports and devices (ucx_info -d):\n")
	if tls, err := ucxInfoDevices(ctx); err != nil {
		fmt.Fprintf(w, "  %v\n", err)
	} else if len(tls) == 0 {
		fmt.Fprintf(w, "  none reported\n")
	} else {
		for _, t := range tls {
			fmt.Fprintf(w, "  %-10s %s\n", t.name, strings.Join(t.devices, ", "))
		}
	}

	fmt.Fprintf(w, "\nUCX settings ucxnet applies (unless the environment sets them):\n")
	defs := ucxnet.EffectiveUCXDefaults()
	if len(defs) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	for _, k := range sortedKeys(defs) {
		fmt.Fprintf(w, "  %s=%s\n", k, defs[k])
	}

	fmt.Fprintf(w, "\nUCX_* environment variables:\n")
	env := ucxEnv()
	if len(env) == 0 {
		fmt.Fprintf(w, "  none (UCX uses its defaults; UCX_TLS unset means all transports)\n")
	}
	for _, kv := range env {
		fmt.Fprintf(w, "  %s\n", kv)
	}

	fmt.Fprintf(w, "\nRegistry:\n")
	spec := os.Getenv(registry.EnvRegistry)
	if spec == "" {
		spec = "(unset: default)"
	}
	fmt.Fprintf(w, "  %s=%s\n", registry.EnvRegistry, spec)
	fmt.Fprintf(w, "  in use: %s\n", reg)
	fmt.Fprintf(w, "\nTCP addresses this process listens on, with a UCX worker up")
	if netDevices != "" {
		fmt.Fprintf(w, " (NET_DEVICES=%s)", netDevices)
	}
	fmt.Fprintf(w, ":\n")
	printListening(w, "  ")
	devices, why := t.LaneDevices()
	if devices == "" {
		devices = "every interface"
	}
	fmt.Fprintf(w, "\nA listener's kernel-TCP lane listens on: %s\n  (%s)\n", devices, why)

	if len(args) == 0 {
		return nil
	}
	return probe(ctx, sio, t, reg, args[0], timeout)
}

// printListening prints the TCP addresses this process listens on, one a
// line, and how to restrict them.
func printListening(w io.Writer, indent string) {
	addrs, err := listeningTCP()
	switch {
	case err != nil:
		fmt.Fprintf(w, "%s%v\n", indent, err)
		return
	case len(addrs) == 0:
		fmt.Fprintf(w, "%snone (UCX's tcp transport is not in use)\n", indent)
		return
	}
	for _, a := range addrs {
		fmt.Fprintf(w, "%s%s\n", indent, a)
	}
	fmt.Fprintf(w, "%s(UCX's tcp transport listens on every interface it may use; restrict it with --net-devices or UCX_NET_DEVICES, or UCX_TLS without tcp)\n", indent)
}

// probe resolves name, prints its entry, dials it and prints the conn's
// transports.
func probe(ctx context.Context, sio *stdio, t *ucxnet.Transport, reg registry.Registry, name string, timeout time.Duration) error {
	w := sio.Out
	fmt.Fprintf(w, "\nName %q:\n", name)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e, err := reg.Resolve(rctx, name)
	if err != nil {
		if !errors.Is(err, registry.ErrNotFound) {
			return fmt.Errorf("resolving %q: %w", name, err)
		}
		// Perhaps a service name: list its instances.
		insts, ierr := reg.Instances(rctx, name)
		if ierr != nil || len(insts) == 0 {
			fmt.Fprintf(w, "  does not resolve: %v\n", err)
			return fmt.Errorf("%q does not resolve in %s", name, reg)
		}
		fmt.Fprintf(w, "  service with %d live instance(s):\n", len(insts))
		for _, in := range insts {
			printEntry(w, in, "    ")
		}
	} else {
		fmt.Fprintf(w, "  resolves:\n")
		printEntry(w, e, "    ")
	}

	if li, err := t.LaneTo(name); err == nil {
		fmt.Fprintf(w, "  lane a dial takes: %s (%s)\n", orNone(li.Lane), li.Reason)
		if len(li.Endpoints) > 0 {
			fmt.Fprintf(w, "  kernel-TCP endpoints: %s\n", strings.Join(li.Endpoints, " "))
		}
	}
	d := ucxnet.Dialer{Timeout: timeout, Transport: t}
	start := time.Now()
	nc, err := d.DialContext(ctx, "ucx", name)
	if err != nil {
		fmt.Fprintf(w, "  dial: %v\n", err)
		return err
	}
	rtt := time.Since(start)
	c := nc.(*ucxnet.Conn)
	fmt.Fprintf(w, "  dial: ok in %v (local %s, remote %s)\n", rtt.Round(time.Microsecond), c.LocalAddr(), c.RemoteAddr())
	fmt.Fprintf(w, "  transports: %s\n", strings.Join(c.Transports(), " "))
	lane, why := c.Lane()
	fmt.Fprintf(w, "  lane: %s (%s)\n", lane, why)
	// Close gracefully: FIN, then give the listener a moment to answer
	// with its own (a conn still waiting for the peer's FIN is reset by
	// Transport.Close), and to read our FIN before this process exits.
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, c)
	c.Close()
	closeTransport(t, time.Second)
	return nil
}

// orNone is s, or "none" when empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func printEntry(w io.Writer, e registry.Entry, indent string) {
	fmt.Fprintf(w, "%sname:    %s\n", indent, e.Name)
	if e.Service != "" {
		fmt.Fprintf(w, "%sservice: %s\n", indent, e.Service)
	}
	fmt.Fprintf(w, "%spid:     %d\n", indent, e.PID)
	fmt.Fprintf(w, "%shost:    %s\n", indent, e.Host)
	fmt.Fprintf(w, "%saddress: %d bytes (packed UCX worker address)\n", indent, len(e.Address))
	for _, k := range sortedKeys(e.Meta) {
		fmt.Fprintf(w, "%smeta:    %s=%s\n", indent, k, e.Meta[k])
	}
	fmt.Fprintf(w, "%sexposed: %s\n", indent, exposure(e))
}

// exposure says where an entry's listener can be reached on kernel TCP,
// from the endpoints it publishes (its UCX worker's own tcp transport,
// if in use, listens as `ucxnet info` shows for this host).
func exposure(e registry.Entry) string {
	var loop, other []string
	for _, s := range strings.Split(e.Meta[ucxnet.MetaTCP], ",") {
		ap, err := netip.ParseAddrPort(strings.TrimSpace(s))
		switch {
		case err != nil:
		case ap.Addr().IsLoopback():
			loop = append(loop, ap.String())
		default:
			other = append(other, ap.String())
		}
	}
	const auth = "; a dialer must prove a pre-shared key only if the listener has one (UCXNET_PSK_FILE)"
	switch {
	case len(other) > 0:
		return "kernel TCP on " + strings.Join(append(other, loop...), " ") + ": other hosts that route to these addresses can connect" + auth
	case len(loop) > 0:
		return "kernel TCP on loopback only (" + strings.Join(loop, " ") + "): processes of this host" + auth
	}
	return "no kernel-TCP endpoint (the UCX lane only)"
}

type ucxTransport struct {
	name    string
	devices []string
}

// printUCXLibrary prints the UCX release loaded, where from, the one ucxnet
// was built against, and a warning when they differ in a way that matters.
func printUCXLibrary(w io.Writer) {
	l := ucxnet.UCX()
	if l.Version == "" {
		fmt.Fprintf(w, "UCX: none in this build (no cgo, or not Linux)\n")
		return
	}
	fmt.Fprintf(w, "UCX version %s (built against %s", l.Version, l.BuiltFor)
	if l.Path != "" {
		fmt.Fprintf(w, "; loaded from %s", l.Path)
	}
	fmt.Fprintf(w, ")\n")
	if warn := l.Warning(); warn != "" {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// ucxInfoPath returns the ucx_info of the UCX release loaded (PREFIX/bin
// beside PREFIX/lib/libucp.so), else the one in PATH: another release's
// ucx_info crashes on the loaded libraries.
func ucxInfoPath() (string, error) {
	if lib := ucxnet.UCX().Path; lib != "" {
		p := filepath.Join(filepath.Dir(lib), "..", "bin", "ucx_info")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return filepath.Clean(p), nil
		}
	}
	return exec.LookPath("ucx_info")
}

// ucxInfoDevices runs "ucx_info -d" and pairs its "Transport:" and
// "Device:" lines, in the order ucx_info reports them.
func ucxInfoDevices(ctx context.Context) ([]ucxTransport, error) {
	path, err := ucxInfoPath()
	if err != nil {
		return nil, errors.New("ucx_info not found in PATH (install ucx-utils to list devices)")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "-d")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ucx_info -d: %v", err)
	}
	return parseUCXInfo(out.Bytes()), nil
}

func parseUCXInfo(b []byte) []ucxTransport {
	var res []ucxTransport
	idx := map[string]int{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimLeft(sc.Text(), "#"))
		if v, ok := strings.CutPrefix(line, "Transport:"); ok {
			cur = strings.TrimSpace(v)
			if _, seen := idx[cur]; !seen {
				idx[cur] = len(res)
				res = append(res, ucxTransport{name: cur})
			}
			continue
		}
		if v, ok := strings.CutPrefix(line, "Device:"); ok && cur != "" {
			t := &res[idx[cur]]
			t.devices = append(t.devices, strings.TrimSpace(v))
		}
	}
	return res
}

// ucxEnv returns the UCX_* environment variables, sorted.
func ucxEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "UCX_") {
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
