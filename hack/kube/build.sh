#!/bin/sh
# build.sh builds the control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler), the node daemons (kubelet,
# kube-proxy) and kubectl at the version pinned in hack/kube/go.mod,
# upstream's prometheus and coredns (below), and helm at the version of the
# Helm packages prober's own go.mod uses, into a
# cache directory outside the tree, and prints that directory. A second run
# finds the binaries and returns at once; a cold build takes minutes (see
# ../../docs/performance.md).
#
#   PROBER_KUBE_ASSETS  where to put the binaries
#                       (default: $(go env GOCACHE)/../prober-kube/<version>)
#   PROBER_KUBE_CACHED_ONLY=1  only look: exit 3 when nothing is cached
set -eu
cd "$(dirname "$0")"
GO=${GO:-go}
version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2 } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' go.mod)
[ -n "$version" ] || { echo "hack/kube: no k8s.io/kubernetes version in go.mod" >&2; exit 1; }
# The cluster test's Prometheus: upstream's, because Debian's prometheus
# package has no Kubernetes service discovery (its NEWS.Debian: removed for
# client-go's dependencies). Only that discovery is compiled in.
prometheus_version=v0.316.0
prometheus_tags=remove_all_sd,enable_kubernetes_sd
# The lab's and the cluster test's DNS: upstream CoreDNS, the DNS every
# Kubernetes distribution runs (Debian packages none).
coredns_version=v1.14.7
# The directory name also carries a hash of go.sum and the Prometheus pin,
# so changing a pin (etcd's, say) rebuilds instead of reusing stale
# binaries.
sum=$( (cat go.mod go.sum; echo "$prometheus_version $prometheus_tags $coredns_version") 2>/dev/null | cksum | cut -d' ' -f1)
dir=${PROBER_KUBE_ASSETS:-$($GO env GOCACHE)/../prober-kube/$version-$sum}
# The chart's tests run the real helm CLI (lint --strict, template, push):
# the same release as the Helm packages the rest of the tests use. Its
# version is checked on the binary, so a new pin rebuilds helm alone.
helm_version=$(awk '$1 == "helm.sh/helm/v3" { print $2 }' ../../go.mod)
[ -n "$helm_version" ] || { echo "hack/kube: no helm.sh/helm/v3 version in go.mod" >&2; exit 1; }
cmds="etcd kubectl kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy"
have() {
	if [ "$1" = helm ]; then
		[ -x "$dir/helm" ] && [ "$("$dir/helm" version --template '{{.Version}}' 2>/dev/null)" = "$helm_version" ]
		return
	fi
	[ -x "$dir/$1" ]
}
have_kube() {
	for cmd in $cmds; do
		have "$cmd" || return 1
	done
}
cached() {
	have_kube && have prometheus && have coredns && have helm
}
if cached; then
	echo "$dir"
	exit 0
fi
if [ "${PROBER_KUBE_CACHED_ONLY:-}" = 1 ]; then
	echo "hack/kube: no binaries cached in $dir (run: make kube)" >&2
	exit 3
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

built=""
if ! have_kube; then
	major=$(echo "$version" | sed 's/^v\([0-9]*\)\..*/\1/')
	minor=$(echo "$version" | sed 's/^v[0-9]*\.\([0-9]*\)\..*/\1/')
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags="$ldflags -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	done
	echo "hack/kube: building $cmds at $version (cold: minutes; cached afterwards in $dir)" >&2
	# One go build for all of them, so the packages they share compile once and
	# the links run in parallel.
	pkgs=""
	for cmd in $cmds; do
		pkgs="$pkgs ./cmd/$cmd"
	done
	start=$(date +%s)
	# shellcheck disable=SC2086
	CGO_ENABLED=0 $GO build -trimpath -ldflags "$ldflags" -o "$tmp/" $pkgs
	echo "hack/kube: built in $(( $(date +%s) - start ))s" >&2
	built="$cmds"
fi
if ! have prometheus; then
	echo "hack/kube: building prometheus $prometheus_version (Kubernetes discovery only)" >&2
	start=$(date +%s)
	GOBIN="$tmp" CGO_ENABLED=0 $GO install -trimpath -tags "$prometheus_tags" -ldflags "-s -w" \
		"github.com/prometheus/prometheus/cmd/prometheus@$prometheus_version"
	echo "hack/kube: built prometheus in $(( $(date +%s) - start ))s" >&2
	built="$built prometheus"
fi
if ! have coredns; then
	echo "hack/kube: building coredns $coredns_version" >&2
	start=$(date +%s)
	GOBIN="$tmp" CGO_ENABLED=0 $GO install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version"
	echo "hack/kube: built coredns in $(( $(date +%s) - start ))s" >&2
	built="$built coredns"
fi
if ! have helm; then
	echo "hack/kube: building helm $helm_version" >&2
	start=$(date +%s)
	GOBIN="$tmp" CGO_ENABLED=0 $GO install -trimpath \
		-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version" \
		"helm.sh/helm/v3/cmd/helm@$helm_version"
	echo "hack/kube: built helm in $(( $(date +%s) - start ))s" >&2
	built="$built helm"
fi
# Publish all at once so a concurrent or interrupted build never leaves a
# half-filled directory that looks complete.
for cmd in $built; do
	mv "$tmp/$cmd" "$dir/$cmd"
done
echo "$dir"
