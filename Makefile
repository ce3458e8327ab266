# prober's build. `make demo` and `make test` set up everything they need on a
# fresh Debian/Ubuntu machine with Go, as root.

GO        ?= go
BIN       ?= bin/prober
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/netprober/prober/buildinfo.Version=$(VERSION) -X github.com/netprober/prober/buildinfo.Revision=$(REVISION)
IMAGE     ?= ghcr.io/netprober/prober:$(VERSION)
# The whole suite, including root-only namespace tests, runs in well under
# this; the bound is there so a hung test fails instead of hanging CI.
TEST_TIMEOUT ?= 60m

.PHONY: all build pause test demo demo-cluster lint bench fuzz image image-docker chart deps clean kube manifests

all: build

# build also writes bin/kubectl-prober, the same binary under the name
# kubectl runs its prober plugin by (`kubectl prober status`): put bin/ on
# PATH, or copy it there; and bin/prober-agent, `prober agent` alone
# without the Kubernetes client, which the DaemonSets run.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/prober
	ln -f $(BIN) $(dir $(BIN))kubectl-prober
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(dir $(BIN))prober-agent ./cmd/prober-agent

# pause is the sandbox binary of the real cluster's pods (testbed/pause).
pause:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(dir $(BIN))pause ./testbed/pause

# deps installs what the tests and the demo need beyond Go. The lab builds its
# namespaces through netlink and nftables from Go, so a machine needs no
# iproute2 or nft binaries; this target stays for later tools.
deps:
	@sh hack/deps.sh

# PROBER_REQUIRE_TOOLS makes tests that need an installed tool (promtool...)
# fail instead of skipping: `make test` installs them, so a skip would hide a
# broken install step.
# The peers integration tests run a real kube-apiserver, etcd and kubectl,
# built by hack/kube/build.sh from the module proxy at a pinned version and
# cached outside the tree: about 7 minutes cold on 2 cores, seconds after.
# TestCluster (a real Kubernetes cluster in namespaces, about 15 minutes)
# runs on its own after the rest: beside the scenario suite on 2 cores,
# both would measure each other's load.
# The packages whose goroutines share state (probes, windows, the plan's
# long-polls, discovery) run under the race detector (it needs cgo: gcc);
# the rest, the scenario and cluster suites, at full speed.
RACE := agent api config hub lab peers plan probe tlsfiles
RACE_PKGS := $(RACE:%=./%/...)
empty :=
RACE_RE := $(subst $(empty) $(empty),|,$(RACE))
# manifests regenerates what is built from other files: the dashboards'
# ConfigMap and PrometheusRule, the chart's copies of them, and
# deploy/daemonset.yaml (the chart's default render). `make test` fails
# while any of them is stale.
manifests:
	$(GO) generate ./dashboards ./charts

test: deps
	$(GO) vet ./...
	assets="$$(GO=$(GO) sh hack/kube/build.sh)" && \
	PROBER_KUBE_ASSETS="$$assets" PROBER_KUBE_REQUIRED=1 PROBER_REQUIRE_TOOLS=1 CGO_ENABLED=1 \
		$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS) && \
	PROBER_KUBE_ASSETS="$$assets" PROBER_KUBE_REQUIRED=1 PROBER_REQUIRE_TOOLS=1 \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestCluster$$' \
		$$($(GO) list ./... | grep -Ev '/($(RACE_RE))(/|$$)') && \
	PROBER_KUBE_ASSETS="$$assets" PROBER_KUBE_REQUIRED=1 PROBER_REQUIRE_TOOLS=1 \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestCluster$$' -v ./testbed

# kube builds (or finds cached) the pinned Kubernetes binaries and prints
# their directory, for `PROBER_KUBE_ASSETS=... go test ./peers`.
kube:
	@GO=$(GO) sh hack/kube/build.sh

demo: deps build
	$(BIN) lab demo

# demo-cluster runs prober as it ships on a real Kubernetes cluster built
# in network namespaces: the pinned kubelet, kube-proxy and control plane
# (hack/kube/build.sh: minutes cold, cached after), containerd, deploy/
# applied with kubectl; then a spine breaks. Ctrl-C cleans up.
demo-cluster: deps build pause
	$(BIN) lab cluster --kube-bin "$$(GO=$(GO) sh hack/kube/build.sh)" --pause $(dir $(BIN))pause

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# fuzz runs each fuzz target briefly; seed corpora run in `make test` anyway.
fuzz:
	$(GO) test ./probe -run '^$$' -fuzz FuzzDecodeTCP -fuzztime 30s
	$(GO) test ./probe -run '^$$' -fuzz FuzzDecodeEcho -fuzztime 30s
	$(GO) test ./config -run '^$$' -fuzz FuzzConfig -fuzztime 30s

# image builds prober's container image with no Docker (hack/image on
# package ociimage): static binaries for linux/amd64 and linux/arm64 in one
# OCI index, the Dockerfile's entrypoint on a distroless-like base, as an
# OCI image-layout archive, bin/prober.oci.tar (`ctr images import`,
# `podman load`, `docker load`), with an SPDX SBOM of its Go modules,
# bin/prober.spdx.json. Deterministic: the same commit gives the same
# digests. The same binaries also go into bin/krew: the kubectl plugin's
# archives and its krew manifest, for a release to publish (their URLs are
# the GitHub release of VERSION). PUSH=1 pushes the index to $(IMAGE) with docker's credentials
# (~/.docker/config.json); without it nothing goes to the network.
image:
	@mkdir -p $(dir $(BIN))
	GO=$(GO) $(GO) run ./hack/image -ref $(IMAGE) -ldflags '$(LDFLAGS)' \
		-version $(VERSION) -revision $(REVISION) -bin $(dir $(BIN)) \
		-o $(dir $(BIN))prober.oci.tar -sbom $(dir $(BIN))prober.spdx.json -krew $(dir $(BIN))krew \
		$(if $(filter 1 yes true,$(PUSH)),-push)

# chart packages charts/prober as bin/prober-VERSION.tgz, as `helm
# package` would (through Helm's Go packages), for `helm push` to an OCI
# registry: version VERSION (a pre-release of Chart.yaml's when VERSION is
# no SemVer tag), appVersion VERSION (the image tag it runs unless told),
# ArtifactHub's annotations; CHANGES=file (one a line) adds this version's
# changes. Nothing goes to the network.
chart:
	@mkdir -p $(dir $(BIN))
	$(GO) run ./hack/chart -version $(VERSION) -o $(dir $(BIN)) $(if $(CHANGES),-changes $(CHANGES))

# image-docker is the Dockerfile's build, for those who have Docker: one
# platform, the builder's, into Docker's own store.
image-docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

clean:
	rm -rf bin
