package recipes

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// Forward accepts conns on ln and connects each to a server with dial,
// copying bytes both ways until both directions end, as `ucxnet proxy`
// does: it serves a local server (a Redis or PostgreSQL Unix socket, say)
// under a ucxnet name. When one side's reading ends with EOF, the other
// side's writing is shut down (CloseWrite); an error on either side closes
// both, so a server that drops a client (Redis's CLIENT KILL) drops the
// ucxnet conn too. A conn whose dial fails is closed. Forward returns when
// ln's Accept fails; net.ErrClosed (ln was closed) is returned as nil. Open
// conns go on until they end.
func Forward(ln net.Listener, dial func(context.Context) (net.Conn, error)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			s, err := dial(context.Background())
			if err != nil {
				c.Close()
				return
			}
			splice(c, s)
		}()
	}
}

// splice copies a to b and b to a until both directions end, then closes
// both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			closeBoth()
			return
		}
		// src ended with EOF: pass it on as a half-close if dst can.
		if cw, ok := dst.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
			closeBoth()
		}
	}
	wg.Add(2)
	go pipe(a, b)
	go pipe(b, a)
	wg.Wait()
	closeBoth()
}
