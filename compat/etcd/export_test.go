//go:build linux

package ucxetcd

// ParseSpec exposes parseSpec to the tests.
func ParseSpec(spec string) (endpoints []string, user, password, prefix string, err error) {
	cfg, prefix, _, err := parseSpec(spec)
	return cfg.Endpoints, cfg.Username, cfg.Password, prefix, err
}
