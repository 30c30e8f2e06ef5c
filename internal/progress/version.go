package progress

import "github.com/ucxnet/ucxnet/internal/cucx"

// BuildRelease returns the UCX release ("1.13") whose headers the binding
// was compiled against ("" in a build without UCX).
func BuildRelease() string { return cucx.BuildRelease() }

// LibraryPath returns the file the UCP library was loaded from ("" if
// unknown or in a build without UCX).
func LibraryPath() string { return cucx.LibraryPath() }

// AddressRelease returns the UCX release ("1.18") that packed a worker
// address, as far as the address says (releases from 1.16 on); "" if it
// does not say or is not an address this build can take.
func AddressRelease(addr []byte) string { return cucx.AddressRelease(addr) }

// ValidAddress reports whether addr is a packed worker address this build
// can take (cucx.ValidateAddress).
func ValidAddress(addr []byte) bool { return cucx.ValidateAddress(addr) == nil }

// StripSharedMemory removes addr's shared-memory interfaces (posix, sysv,
// cma, knem, xpmem), once addr passed the checks Connect runs
// (cucx.CheckTransports): an interface forged as shared memory is
// refused, not quietly dropped. Empty if nothing else is left.
func StripSharedMemory(addr []byte) ([]byte, error) {
	if err := cucx.CheckTransports(addr); err != nil {
		return nil, err
	}
	return cucx.StripSharedMemory(addr)
}
