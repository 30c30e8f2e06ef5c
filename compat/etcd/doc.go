// Package ucxetcd is an etcd backend for the ucxnet name registry.
//
// A ucxnet listener publishes its UCX worker address as a
// [registry.Entry]; with this package the entries live in an etcd cluster,
// so listeners and dialers on any host that reaches etcd find each other.
//
// Each entry is stored as JSON under <prefix>/entries/<name>, attached to
// an etcd lease of its own (10 s by default, see [WithTTL]) that the
// publishing process keeps alive. A publisher that dies stops renewing its
// lease and its entry disappears when the lease expires; a publisher that
// lost its lease (etcd was down for longer than the TTL, or was restarted
// without its data) publishes the entry again, under a new lease, in the
// background. Register is a single transaction that only creates the key,
// so two publishers never both own a name: the loser gets an error
// wrapping [registry.ErrNameInUse], which also matches syscall.EADDRINUSE.
//
// Importing the package registers the "etcd" scheme with
// [registry.RegisterScheme], so that
//
//	import _ "github.com/ucxnet/ucxnet/compat/etcd"
//
// lets UCXNET_REGISTRY=etcd://127.0.0.1:2379/myprefix (or
// etcd://host1:2379,host2:2379/myprefix) select it in any ucxnet program;
// see [Dial] for the spec syntax. Programs that already hold a
// *clientv3.Client use [New].
//
// Like the directory registry, the etcd registry treats an entry published
// from this host by a process that no longer exists as stale: Resolve and
// Instances skip and delete it, and Register replaces it, without waiting
// for its lease to run out (see [WithLocalLivenessCheck]).
//
// The client is go.etcd.io/etcd/client/v3 of the 3.5 series, which talks to
// etcd servers 3.4 and later.
package ucxetcd
