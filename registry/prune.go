package registry

import (
	"context"
	"fmt"
)

// Prune removes every stale entry file (its publisher on this host is
// gone) and every corrupt one, as Resolve and Instances remove those they
// meet, and says what it removed: one line per file, with the reason.
// Each file is judged again under the directory's lock before it goes, so
// an entry of a live process is never removed.
func (d *Dir) Prune(ctx context.Context) ([]string, error) {
	bases, err := d.entryFiles(ctx)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, base := range bases {
		l, err := d.load(base)
		if err != nil {
			return nil, err
		}
		if l.v == corrupt || l.v == stale {
			bad = append(bad, base)
		}
	}
	if len(bad) == 0 {
		return nil, nil
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var removed []string
	for _, base := range bad {
		l, err := d.removeBadLocked(base)
		if err != nil {
			return removed, err
		}
		switch l.v {
		case stale:
			removed = append(removed, fmt.Sprintf("%s: %s", l.entry.Name, l.reason))
		case corrupt:
			removed = append(removed, fmt.Sprintf("%s (corrupt): %s", base, l.reason))
		}
	}
	return removed, nil
}
