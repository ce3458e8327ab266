package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/hack/internal/release"
)

// pluginBin is the plugin's executable: kubectl runs `kubectl prober` by
// this name.
const pluginBin = "kubectl-prober"

// The krew manifest (krew.sigs.k8s.io's Plugin, v1alpha2): what `kubectl
// krew install` reads.
type krewPlugin struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   krewMetadata `json:"metadata"`
	Spec       krewSpec     `json:"spec"`
}

type krewMetadata struct {
	Name string `json:"name"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Caveats          string         `json:"caveats"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector krewSelector `json:"selector"`
	URI      string       `json:"uri"`
	Sha256   string       `json:"sha256"`
	Bin      string       `json:"bin"`
	Files    []krewFile   `json:"files"`
}

type krewSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// krewArchive is the archive of one platform's plugin, as the release
// publishes it under o.KrewURL.
func krewArchive(arch string) string { return pluginBin + "_linux_" + arch + ".tar.gz" }

// writeKrew writes, in o.Krew, each built binary (bins by GOARCH) as the
// plugin's archive and prober.yaml, the krew manifest naming each
// archive under o.KrewURL with its sha256. The archives are
// deterministic: the same binaries give the same bytes, so the same
// manifest.
func writeKrew(o options, bins map[string]string, log io.Writer) error {
	v, err := release.SemVer(o.Version, "0.0.0")
	if err != nil {
		return fmt.Errorf("krew: %w", err)
	}
	if err := os.MkdirAll(o.Krew, 0o755); err != nil {
		return fmt.Errorf("krew: %w", err)
	}
	p := krewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin",
		Metadata: krewMetadata{Name: "prober"},
		Spec: krewSpec{
			Version:          "v" + v.String(),
			Homepage:         "https://github.com/netprober/prober",
			ShortDescription: "Name the switch, link or LB dropping the cluster's packets",
			Description: "Asks prober's matrix, through a port-forward to its pod, what drops or delays\n" +
				"the cluster's packets (status), who probes a node and its cells (who),\n" +
				"traces a pair now (trace), and serves the matrix page (page).\n",
			Caveats: "Needs prober running in the cluster (namespace prober, or -n), and\n" +
				"list on pods and create on pods/portforward in its namespace.\n",
		},
	}
	for _, arch := range o.Arches {
		raw, err := os.ReadFile(bins[arch])
		if err != nil {
			return fmt.Errorf("krew: %w", err)
		}
		archive, err := tarGz(pluginBin, raw)
		if err != nil {
			return fmt.Errorf("krew: %w", err)
		}
		name := krewArchive(arch)
		if err := os.WriteFile(filepath.Join(o.Krew, name), archive, 0o644); err != nil {
			return fmt.Errorf("krew: %w", err)
		}
		sum := sha256.Sum256(archive)
		p.Spec.Platforms = append(p.Spec.Platforms, krewPlatform{
			Selector: krewSelector{MatchLabels: map[string]string{"os": "linux", "arch": arch}},
			URI:      strings.TrimSuffix(o.KrewURL, "/") + "/" + name,
			Sha256:   hex.EncodeToString(sum[:]),
			Bin:      pluginBin,
			Files:    []krewFile{{From: pluginBin, To: "."}},
		})
	}
	out, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	manifest := filepath.Join(o.Krew, "prober.yaml")
	if err := os.WriteFile(manifest, out, 0o644); err != nil {
		return fmt.Errorf("krew: %w", err)
	}
	fmt.Fprintf(log, "%s: krew plugin prober %s, %d platforms under %s\n", manifest, p.Spec.Version, len(p.Spec.Platforms), o.KrewURL)
	return nil
}

// tarGz is a gzipped tar of one executable, with no time or owner in it.
func tarGz(name string, body []byte) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
