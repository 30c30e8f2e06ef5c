package session

// Raw peers of the tests (UCX workers outside any Transport) and the
// kernel channel's vouching.

// rawTarget is the address a raw UCX peer of the tests reaches target at:
// without shared memory, as target reaches a peer that no kernel channel
// vouched for (an endpoint pair with shared memory on one side only makes
// UCX abort, "endpoint reconfiguration not supported"). Where nothing
// would be left (UCX_TLS=sm), target vouches for the raw worker self
// instead, as a channel from a process of its user would.
func rawTarget(target *Transport, self []byte) []byte {
	a := target.eng.Address()
	if s, err := testUCX.stripSharedMemory(a); err == nil && len(s) > 0 {
		return s
	}
	vouchFor(target, self)
	return a
}

// vouchFor has tr vouch for shared memory with the raw worker at addr, as
// a channel from a process of its user would, where addr offers nothing
// else (UCX_TLS=sm): a raw peer of the tests stands for such a process.
func vouchFor(tr *Transport, addr []byte) {
	if s, err := testUCX.stripSharedMemory(addr); err == nil && len(s) > 0 {
		return
	}
	k := &tr.kc
	k.mu.Lock()
	if k.byAddr == nil {
		k.byAddr = make(map[string]*link)
	}
	k.byAddr[string(addr)] = &link{shm: true}
	k.mu.Unlock()
}
