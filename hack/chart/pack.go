package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/hack/internal/release"
)

// options are the flags of one packaging.
type options struct {
	Dir, Version, Platforms, Out, ChangesFile string
}

// maxChanges bounds the changes file: ArtifactHub shows a short list,
// and a file given by mistake must not land in Chart.yaml whole.
const maxChanges = 64

// pack loads the chart at o.Dir (honouring its .helmignore, as `helm
// package` does), stamps o.Version and ArtifactHub's annotations on it
// and saves it under o.Out, returning the archive's path.
func pack(o options) (string, error) {
	ch, err := loader.LoadDir(o.Dir)
	if err != nil {
		return "", fmt.Errorf("load %s: %w", o.Dir, err)
	}
	v, err := release.SemVer(o.Version, ch.Metadata.Version)
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = v.String()
	ch.Metadata.AppVersion = o.Version
	img, _ := ch.Values["image"].(map[string]any)
	repo, _ := img["repository"].(string)
	if repo == "" {
		return "", fmt.Errorf("%s: values.yaml has no image.repository", o.Dir)
	}
	ann, err := annotations(o, v, repo)
	if err != nil {
		return "", err
	}
	if ch.Metadata.Annotations == nil {
		ch.Metadata.Annotations = map[string]string{}
	}
	for k, a := range ann {
		ch.Metadata.Annotations[k] = a
	}
	path, err := chartutil.Save(ch, o.Out)
	if err != nil {
		return "", fmt.Errorf("save: %w", err)
	}
	return path, nil
}

// annotations are ArtifactHub's, for this build: the image the chart
// runs by default (values' repository, tagged with its appVersion) and
// its platforms, the changes when
// given, and whether it is a pre-release. The chart's static ones
// (links) are in its Chart.yaml.
func annotations(o options, v semver.Version, repo string) (map[string]string, error) {
	type image struct {
		Name      string   `json:"name"`
		Image     string   `json:"image"`
		Platforms []string `json:"platforms,omitempty"`
	}
	img := image{Name: "prober", Image: repo + ":" + o.Version}
	for p := range strings.SplitSeq(o.Platforms, ",") {
		if p = strings.TrimSpace(p); p != "" {
			img.Platforms = append(img.Platforms, p)
		}
	}
	images, err := yaml.Marshal([]image{img})
	if err != nil {
		return nil, err
	}
	ann := map[string]string{"artifacthub.io/images": string(images)}
	if v.Prerelease() != "" {
		ann["artifacthub.io/prerelease"] = "true"
	}
	if o.ChangesFile != "" {
		changes, err := readChanges(o.ChangesFile)
		if err != nil {
			return nil, err
		}
		if len(changes) > 0 {
			b, err := yaml.Marshal(changes)
			if err != nil {
				return nil, err
			}
			ann["artifacthub.io/changes"] = string(b)
		}
	}
	return ann, nil
}

// readChanges reads one change a line, blank lines and a leading "- "
// dropped, at most maxChanges.
func readChanges(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("changes: %w", err)
	}
	var out []string
	for l := range strings.SplitSeq(string(raw), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
		if l == "" {
			continue
		}
		if len(out) == maxChanges {
			return nil, fmt.Errorf("changes: %s has more than %d lines; ArtifactHub shows a short list", path, maxChanges)
		}
		out = append(out, l)
	}
	return out, nil
}
