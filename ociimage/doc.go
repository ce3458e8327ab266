// Package ociimage builds prober's container images with
// github.com/google/go-containerregistry (ggcr), for `make image`
// (hack/image) and for the real-cluster testbed (testbed.WriteImage), so
// that one piece of code owns what an image of this project holds.
//
// An image here is static binaries on a scratch-like base (BaseFiles:
// the /etc/passwd, /etc/group, /etc/nsswitch.conf, /tmp, /root and
// /home/nonroot that distroless's static image has), with no
// timestamps: the same inputs give the same digests, so a rebuild of the
// same commit changes nothing a registry or a node holds.
//
// The pieces:
//
//   - NewLayer turns Files into a tar layer (parents first, sorted, owned
//     by root unless said, mtime zero), gzip or uncompressed.
//   - NewImage puts layers and a Config on an empty OCI image for one
//     platform; NewIndex gathers images of several platforms.
//   - WriteArchive writes an image or an index as an OCI image-layout tar
//     archive (the format `ctr images import`, `podman load` and
//     `docker load` read), named by the annotations containerd's import
//     reads, with a Docker manifest.json beside index.json for Docker's
//     classic image store.
//   - NewSBOM describes the Go modules of binaries (their embedded build
//     information) as an SPDX 2.3 document, written with
//     github.com/spdx/tools-golang.
//
// Nothing here touches the network; pushing is hack/image's job.
//
// No CA certificates, unlike distroless: prober talks TLS to the
// Kubernetes API server, whose CA it takes from its service account, and
// to http2_ping targets, which in a cluster are the API server or a load
// balancer with the cluster's own CA (a target's caFile). A bundle copied
// from the build machine would make the image depend on that machine, and
// the module proxy serves none; so an http2_ping TLS target verified
// against public roots needs its caFile mounted (docs/kubernetes.md).
package ociimage
