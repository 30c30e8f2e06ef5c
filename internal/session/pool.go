package session

import "sync"

// BufPool is a bounded free list of byte buffers: a Transport's read
// buffers that small payloads are coalesced into, and the buffers of open
// frames. Max, the most it keeps, is set before first use. It is safe for
// concurrent use; its lock is a leaf.
type BufPool struct {
	Max int

	mu   sync.Mutex
	bufs [][]byte
}

// Get returns a recycled buffer, emptied, or nil if there is none.
func (f *BufPool) Get() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.bufs)
	if n == 0 {
		return nil
	}
	b := f.bufs[n-1]
	f.bufs[n-1] = nil
	f.bufs = f.bufs[:n-1]
	return b[:0]
}

// Put keeps b for reuse, unless the pool holds Max buffers already.
func (f *BufPool) Put(b []byte) {
	f.mu.Lock()
	if len(f.bufs) < f.Max {
		f.bufs = append(f.bufs, b[:0])
	}
	f.mu.Unlock()
}
