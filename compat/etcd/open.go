package ucxetcd

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ucxnet/ucxnet/registry"
)

// DefaultEndpoint is the etcd endpoint a spec without hosts connects to.
const DefaultEndpoint = "127.0.0.1:2379"

// Open is the function registered for the "etcd" scheme: Dial(spec). The
// registry it returns is a *Registry; type-assert it (or to io.Closer) to
// close it.
func Open(spec string) (registry.Registry, error) {
	r, err := Dial(spec)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Dial connects to the etcd cluster a spec names and returns a Registry
// that owns the client (Close closes it). The spec is
//
//	etcd://[user:password@]host:port[,host:port...][/prefix][?ttl=10s&timeout=5s]
//
// Hosts may carry a scheme ("http://h:2379" or, percent-encoded, as the
// URL syntax needs); no hosts means [DefaultEndpoint]. The path is the key
// prefix, [DefaultPrefix] when empty. The query sets the lease TTL
// ([WithTTL]; a duration or whole seconds) and the request and dial
// timeout ([WithRequestTimeout]). "etcd" and "etcd:" alone mean
// etcd://127.0.0.1:2379/ucxnet. opts are applied after the spec's
// settings.
//
// Without credentials Dial does not wait for the cluster to answer: a
// cluster that is down makes the registry's calls fail (after the request
// timeout), not Dial. With credentials the client authenticates at once,
// so Dial fails if no endpoint answers within the timeout.
func Dial(spec string, opts ...Option) (*Registry, error) {
	cfg, prefix, specOpts, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("ucxetcd: connecting to %v: %w", cfg.Endpoints, err)
	}
	r := New(cli, prefix, append(specOpts, opts...)...)
	r.ownClient = true
	return r, nil
}

// parseSpec turns an "etcd://..." spec into a client configuration, a
// prefix and options.
func parseSpec(spec string) (clientv3.Config, string, []Option, error) {
	cfg := clientv3.Config{
		DialTimeout:          DefaultRequestTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	}
	bad := func(format string, args ...any) (clientv3.Config, string, []Option, error) {
		return cfg, "", nil, fmt.Errorf("ucxetcd: bad spec %q: %s", spec, fmt.Sprintf(format, args...))
	}
	s := strings.TrimSpace(spec)
	scheme, rest, _ := strings.Cut(s, ":")
	if !strings.EqualFold(scheme, "etcd") {
		return bad("scheme is not etcd")
	}
	rest, query, _ := strings.Cut(rest, "?")
	var authority, path string
	if strings.HasPrefix(rest, "//") {
		authority, path, _ = strings.Cut(rest[2:], "/")
		path = "/" + path
	} else {
		path = rest
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		user, pass, _ := strings.Cut(authority[:i], ":")
		var err error
		if cfg.Username, err = url.PathUnescape(user); err != nil {
			return bad("user: %v", err)
		}
		if cfg.Password, err = url.PathUnescape(pass); err != nil {
			return bad("password: %v", err)
		}
		authority = authority[i+1:]
	}
	for _, h := range strings.Split(authority, ",") {
		if h == "" {
			continue
		}
		h, err := url.PathUnescape(h)
		if err != nil {
			return bad("host %q: %v", h, err)
		}
		cfg.Endpoints = append(cfg.Endpoints, h)
	}
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = []string{DefaultEndpoint}
	}
	prefix, err := url.PathUnescape(path)
	if err != nil {
		return bad("path: %v", err)
	}
	var opts []Option
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		d, err := parseDuration(v)
		if err != nil {
			return bad("%s=%q: %v", k, v, err)
		}
		switch k {
		case "ttl":
			opts = append(opts, WithTTL(d))
		case "timeout":
			cfg.DialTimeout = d
			opts = append(opts, WithRequestTimeout(d))
		default:
			return bad("unknown parameter %q (want ttl or timeout)", k)
		}
	}
	return cfg, prefix, opts, nil
}

// parseDuration accepts a Go duration or a number of seconds.
func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("not positive")
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("not positive")
	}
	return d, nil
}
