package session

import "net"

// ReadState says what a Read would find now, without blocking: data
// waiting (or a conn already closed here), or the peer's end (its FIN or a
// reset) with nothing left before it. A UCX-lane conn's SyscallConn
// answers a pool's health check with it.
func (c *Conn) ReadState() (data, ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.in.Buffered() > 0 {
		return true, false
	}
	return false, c.state.Finished() || c.rerr != nil
}

// LaneSocket returns the kernel-TCP lane's socket; nil on the UCX lane.
// Its options (SetNoDelay, buffers, SyscallConn) are the conn's.
func (c *Conn) LaneSocket() *net.TCPConn {
	if c.lane == nil {
		return nil
	}
	return c.lane.TC
}
