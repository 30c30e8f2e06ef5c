// Package ucxconf is what ucxnet knows of UCX's configuration, in pure
// Go: the settings it applies over the environment, the receive segments
// it sizes, what a UCX_TLS value selects, and the rules that depend on
// the UCX release.
package ucxconf

import (
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Setting is one UCX setting, named without the UCX_ prefix, as
// ucp_config_modify takes it.
type Setting struct {
	Name, Value string
}

// defaults are the UCX settings ucxnet changes unless the user set the
// corresponding UCX_* environment variable.
var defaults = []Setting{
	// Shared memory transports are excluded under peer error handling
	// unless this is set, and ucxnet needs peer error handling.
	{Name: "MM_ERROR_HANDLING", Value: "y"},
	// Receive segments that hold one whole frame (see Segment).
	{Name: Shm.names[0], Value: strconv.Itoa(Shm.size)},
	{Name: TCP.names[0], Value: strconv.Itoa(TCP.size)},
	// Detect dead peers in about a second rather than 20 s.
	{Name: "KEEPALIVE_INTERVAL", Value: "1s"},
	// Non-blocking connects for UCX's tcp transport (see ConnNB).
	{Name: ConnNB, Value: "y"},
	// UCP's protocol selection of UCX 1.15 and earlier, from 1.18 on
	// (see ProtoEnable).
	{Name: ProtoEnable, Value: "n"},
}

// ProtoEnable is UCP's setting that chooses its protocol selection:
// "y", the default from UCX 1.16 on, or "n", the one of earlier releases.
// ucxnet sets "n" from UCX 1.18 on, where it sends its frames faster
// (docs/PERFORMANCE.md, "UCX releases"): over UCX_TLS=tcp 64 KiB streams
// on one conn went from 0.10-0.19x Go TCP to 0.85-1.08x with 1.18.1 and
// from 0.11-0.14x to 0.72-1.08x with 1.22.0; over shared memory 1.18.1
// went from 5.4 to 6.2 GB/s and 1.22.0 stayed within the runs' spread.
// Either choice talks to peers of any release (TestLaneMixedRelease).
const ProtoEnable = "PROTO_ENABLE"

// protoV1 reports whether ucxnet sets ProtoEnable to "n" in release.
func protoV1(release string) bool {
	maj, min, ok := MajorMinor(release)
	return ok && (maj > 1 || min >= 18)
}

// ConnNB is UCX's tcp setting for non-blocking connects (the environment's
// UCX_TCP_CONN_NB). UCX 1.13's tcp transport connects again when a
// connection it is still setting up is reset (uct_tcp_ep_handle_io_err);
// with a blocking connect, the refusal of a peer that has gone fails the
// endpoint inside that call and queues its destruction, and the
// connection setup that called it then gives the endpoint its send side:
// the queued destruction asserts (tcp_ep.c:478, "!(ep->flags &
// UCT_TCP_EP_FLAG_CTX_TYPE_TX)") and aborts the process. A non-blocking
// connect reports the refusal later, from the event loop, through the
// endpoint's ordinary failure.
const ConnNB = "CONN_NB"

// ModifyName returns the name under which ucp_config_modify takes the
// setting name in UCX release: a tcp setting's whole name (TCP_ prefixed)
// from 1.18 on (see Segment.ModifyName).
func ModifyName(name, release string) string {
	if seg := segmentNamed(name); seg != nil {
		return seg.ModifyName(release)
	}
	if name == ConnNB {
		if maj, min, ok := MajorMinor(release); ok && (maj > 1 || min >= 18) {
			return "TCP_" + name
		}
	}
	return name
}

// envName returns the UCX_* environment variable (without UCX_) that sets
// the setting name.
func envName(name string) string {
	if seg := segmentNamed(name); seg != nil {
		return seg.envName
	}
	if name == ConnNB {
		return "TCP_" + name
	}
	return name
}

// EffectiveTLS is the UCX_TLS in force, and whether it is set: user's
// "TLS" (a Config.UCX map) overrides the environment's.
func EffectiveTLS(user map[string]string) (string, bool) {
	if v, set := user["TLS"]; set {
		return v, true
	}
	return os.LookupEnv("UCX_TLS")
}

// Settings merges ucxnet's defaults (skipping those the environment sets,
// and those of transports the UCX_TLS in force leaves out) with the
// user's settings (a Config.UCX map), for a process running UCX release
// (as "1.13.1"; segment names depend on it).
func Settings(user map[string]string, release string) []Setting {
	var out []Setting
	tls, _ := EffectiveTLS(user)
	for _, s := range defaults {
		if _, set := os.LookupEnv("UCX_" + envName(s.Name)); set {
			continue
		}
		seg := segmentNamed(s.Name)
		if (s.Name == "MM_ERROR_HANDLING" || seg == Shm) && !SharedMemoryEnabled(tls) ||
			(seg == TCP || s.Name == ConnNB) && !TCPEnabled(tls) {
			continue // UCX warns about settings of components it did not load
		}
		if s.Name == ProtoEnable && !protoV1(release) {
			continue
		}
		if seg != nil && seg.userValue(user) != "" {
			continue // the user chose the segment size (maybe under another name)
		}
		if _, set := user[s.Name]; set {
			continue
		}
		if _, set := user["TCP_"+s.Name]; set && s.Name == ConnNB {
			continue
		}
		s.Name = ModifyName(s.Name, release)
		out = append(out, s)
	}
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// UCX ignores some names through ucp_config_modify (see
		// Segment.ModifyName): pass the one it honours.
		name := ModifyName(k, release)
		if k == "TCP_"+ConnNB {
			name = ModifyName(ConnNB, release)
		}
		out = append(out, Setting{Name: name, Value: user[k]})
	}
	return out
}

// EnvDefaults returns the settings ucxnet applies on top of the
// environment (those the environment does not set itself), named as the
// UCX_* environment variables that would set them.
func EnvDefaults(release string) map[string]string {
	m := map[string]string{}
	for _, s := range Settings(nil, release) {
		name := s.Name
		if name == "TCP_"+ConnNB {
			name = ConnNB
		}
		m["UCX_"+envName(name)] = s.Value // the name UCX reads from the environment
	}
	return m
}

// SharedMemoryEnabled reports whether a UCX_TLS value may select one of
// the shared-memory transports that UCX's MM_ settings configure.
func SharedMemoryEnabled(tls string) bool {
	return tlsSelects(tls, []string{"posix", "sysv", "xpmem"})
}

// TCPEnabled reports whether a UCX_TLS value may select UCX's tcp
// transport.
func TCPEnabled(tls string) bool { return tlsSelects(tls, []string{"tcp"}) }

// tlsAliases are UCX 1.13's UCX_TLS group names (ucp_context.c) that
// matter here.
var tlsAliases = map[string][]string{
	"sm":  {"posix", "sysv", "xpmem", "knem", "cma"},
	"shm": {"posix", "sysv", "xpmem", "knem", "cma"},
	"mm":  {"posix", "sysv", "xpmem"},
}

// tlsSelects reports whether a UCX_TLS value leaves at least one of
// members selectable: an empty value or "all" selects everything; a list
// selects what it names (groups expanded); a "^" list selects everything
// it does not name.
func tlsSelects(tls string, members []string) bool {
	tls = strings.TrimSpace(tls)
	if tls == "" {
		return true
	}
	exclude := strings.HasPrefix(tls, "^")
	named := map[string]bool{}
	for _, f := range strings.Split(strings.TrimPrefix(tls, "^"), ",") {
		f = strings.TrimSpace(f)
		for _, m := range members {
			if f == m || f == "all" || slices.Contains(tlsAliases[f], m) {
				named[m] = true
			}
		}
	}
	if exclude {
		return len(named) < len(members)
	}
	return len(named) > 0
}
