// Package peerstest runs a real etcd and kube-apiserver on 127.0.0.1 for
// integration tests, built from the Go module proxy at the version pinned
// in hack/kube/go.mod (hack/kube/build.sh) and cached between runs.
//
// Tests that use it skip under -short, and skip when the binaries cannot be
// built unless PROBER_KUBE_REQUIRED is set (make test sets it, so CI fails
// instead). Everything listens on loopback; the service CIDR is the
// documentation range 198.51.100.0/24, allocated but never contacted.
package peerstest
