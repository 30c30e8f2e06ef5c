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
		if _, set := os.LookupEnv("UCX_" + s.Name); set {
			continue
		}
		seg := segmentNamed(s.Name)
		if (s.Name == "MM_ERROR_HANDLING" || seg == Shm) && !SharedMemoryEnabled(tls) ||
			seg == TCP && !TCPEnabled(tls) {
			continue // UCX warns about settings of components it did not load
		}
		if seg != nil && seg.userValue(user) != "" {
			continue // the user chose the segment size (maybe under another name)
		}
		if _, set := user[s.Name]; set {
			continue
		}
		if seg != nil {
			s.Name = seg.ModifyName(release)
		}
		out = append(out, s)
	}
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := k
		if seg := segmentNamed(k); seg != nil {
			// UCX ignores some segment names through ucp_config_modify
			// (see Segment.ModifyName): pass the one it honours.
			name = seg.ModifyName(release)
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
		if seg := segmentNamed(name); seg != nil {
			name = seg.envName // the name UCX reads from the environment
		}
		m["UCX_"+name] = s.Value
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
