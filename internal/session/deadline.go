// Copyright 2010 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.
//
// The deadline type below is adapted from the Go standard library's
// net/pipe.go (pipeDeadline). The Go licence (BSD-3-Clause) applies to the
// adapted code; its text is in LICENSE-go at the root of this repository.

package session

import (
	"sync"
	"time"
)

// deadline is an abstraction for handling timeouts, as in net/pipe.go: a
// timer closes a cancel channel, which is recreated when the deadline moves
// after expiry.
type deadline struct {
	mu     sync.Mutex // guards timer and cancel
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline passes
}

func makeDeadline() deadline {
	return deadline{cancel: make(chan struct{})}
}

// set sets the point in time when the deadline will time out. A timeout
// event is signaled by closing the channel returned by wait. Once a timeout
// has occurred, the deadline can be refreshed by specifying a t value in the
// future. A zero value for t prevents timeout.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()

	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // wait for the timer callback to finish and close cancel
	}
	d.timer = nil

	closed := isClosedChan(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// wait returns a channel that is closed when the deadline is exceeded.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

// expired reports whether the deadline has passed.
func (d *deadline) expired() bool { return isClosedChan(d.wait()) }

func isClosedChan(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
