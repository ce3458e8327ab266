package charts

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Render renders the chart at dir as `helm template <release> dir -n
// namespace` would, with vals over its defaults (checked against its
// values.schema.json): the manifests in Helm's install order, each under
// a "# Source:" line, and NOTES.txt. Only tests and `make manifests` use
// it: the prober binary does not link Helm.
func Render(dir, release, namespace string, vals map[string]any) (manifest, notes string, err error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", "", fmt.Errorf("load chart %s: %w", dir, err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return "", "", err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return "", "", err
	}
	for name, body := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			notes = body
			delete(files, name)
		}
	}
	_, ms, err := releaseutil.SortManifests(files, chartutil.DefaultCapabilities.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "# Source: %s\n%s\n", m.Name, strings.TrimSpace(m.Content))
	}
	return b.String(), notes, nil
}
