// Copyright 2010 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.
//
// The Deadline type below is adapted from the Go standard library's
// net/pipe.go (pipeDeadline). The Go licence (BSD-3-Clause) applies to the
// adapted code; its text is in LICENSE-go at the root of this repository.

// Package deadline is a conn's read or write deadline as a cancel channel,
// as in net/pipe.go: a timer closes the channel when the deadline passes,
// and a new channel replaces it when the deadline moves after expiry.
// A UCX stream (internal/session's Conn) keeps two, for its Read and
// Write, which ask for the channel each time they check or wait.
package deadline

import (
	"sync"
	"time"
)

// Deadline is a point in time that closes a cancel channel when it
// passes. Use Make to get one; it is safe for concurrent use.
type Deadline struct {
	mu     sync.Mutex // guards timer and cancel
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline passes
}

// Make returns a Deadline that is not set.
func Make() Deadline {
	return Deadline{cancel: make(chan struct{})}
}

// Set sets the point in time when the deadline will time out. A timeout
// event is signaled by closing the channel returned by Wait. Once a timeout
// has occurred, the deadline can be refreshed by specifying a t value in the
// future. A zero value for t prevents timeout.
func (d *Deadline) Set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()

	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // wait for the timer callback to finish and close cancel
	}
	d.timer = nil

	closed := Closed(d.cancel)
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

// Wait returns a channel that is closed when the deadline is exceeded.
// After the deadline is moved past an expiry, Wait returns a new one.
func (d *Deadline) Wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

// Closed reports whether c is closed.
func Closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
