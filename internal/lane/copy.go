package lane

import "io"

// WriteTo copies the connection to w until EOF with
// (*net.TCPConn).WriteTo (splice to a socket or pipe); EOF reports the
// end once it returns without an error.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	n, err := c.TC.WriteTo(w)
	if err == nil {
		c.eof.Store(true)
	}
	return n, err
}
