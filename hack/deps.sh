#!/bin/sh
# Installs what `make test` and `make demo` need beyond Go on a fresh
# Debian/Ubuntu machine. Idempotent: a machine that has everything is left
# alone and nothing is fetched.
set -eu

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "hack/deps.sh: not root: the namespace tests and the demo will be skipped or refuse to run" >&2
		exit 0
	fi
}

# check_go: the module needs the Go version in go.mod.
want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod)
have=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" != "$want" ]; then
	echo "hack/deps.sh: go.mod wants Go $want, this machine has $have" >&2
	exit 1
fi
need_root

# apt_install PKG CMD: install Debian package PKG unless CMD is on PATH
# (or, when CMD is a path, exists).
apt_updated=""
apt_install() {
	command -v "$2" >/dev/null 2>&1 && return 0
	case "$2" in /*) [ -e "$2" ] && return 0 ;; esac
	echo "hack/deps.sh: installing $1 (for $2)" >&2
	if [ -z "$apt_updated" ]; then
		apt-get update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null
}

# make test runs the race detector, which links with cgo.
apt_install gcc gcc

# promtool checks every /metrics endpoint and the alert rules.
apt_install prometheus promtool

# The same package's server runs in the dashboards' and alerts' live test.
apt_install prometheus prometheus

# traceroute -T is what the tracer is compared against (issue 4, docs/performance.md).
apt_install traceroute traceroute

# The real-cluster harness (package testbed, TestCluster, make
# demo-cluster): a container runtime on every lab node, the CNI plugins that
# wire its pods, iptables for kube-proxy. The Kubernetes binaries come from
# hack/kube/build.sh; the images are written from the checkout.
apt_install containerd containerd
apt_install runc runc
apt_install containernetworking-plugins /usr/lib/cni/ptp
apt_install iptables iptables

# The matrix page's browser tests (package hub/browsertest) drive Debian's
# headless Chromium over the DevTools protocol; no test tool downloads a
# browser of its own. fonts-liberation is only recommended by it, and
# without a font the failure screenshots show no text.
apt_install chromium /usr/bin/chromium
apt_install fonts-liberation /usr/share/fonts/truetype/liberation
