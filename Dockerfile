# syntax=docker/dockerfile:1
# Multi-stage: build a static binary with no cgo, ship it alone.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/netprober/prober/buildinfo.Version=${VERSION} -X github.com/netprober/prober/buildinfo.Revision=${REVISION}" \
      -o /out/prober ./cmd/prober && \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/netprober/prober/buildinfo.Version=${VERSION} -X github.com/netprober/prober/buildinfo.Revision=${REVISION}" \
      -o /out/prober-agent ./cmd/prober-agent

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/prober /prober
# The agent alone, without the Kubernetes client: the DaemonSets run it.
COPY --from=build /out/prober-agent /prober-agent
# Runs as UID 0 on purpose: Kubernetes grants an added capability
# (NET_RAW, for the raw sockets) only to a root process; the manifests
# drop every other capability and make the root filesystem read-only.
ENTRYPOINT ["/prober"]
CMD ["agent", "--config", "/etc/prober/agent.yaml"]
