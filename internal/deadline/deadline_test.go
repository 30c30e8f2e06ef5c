package deadline

import (
	"testing"
	"time"
)

// TestDeadline checks that a deadline in the past closes the channel, that
// moving it into the future or clearing it gives a fresh open channel, and
// that a deadline in the future is not expired yet.
func TestDeadline(t *testing.T) {
	d := Make()
	if Closed(d.Wait()) {
		t.Fatal("a deadline not set is expired")
	}
	d.Set(time.Unix(1, 0))
	if !Closed(d.Wait()) {
		t.Fatal("a deadline in the past is not expired")
	}
	d.Set(time.Now().Add(time.Hour))
	if Closed(d.Wait()) {
		t.Fatal("a deadline moved an hour ahead is expired")
	}
	d.Set(time.Unix(1, 0))
	d.Set(time.Time{})
	if Closed(d.Wait()) {
		t.Fatal("a cleared deadline is expired")
	}
	d.Set(time.Now().Add(time.Millisecond))
	<-d.Wait() // closes once the timer fires
}
