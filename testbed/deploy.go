package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/config"
)

// DeployEdits are the edits docs/kubernetes.md tells a user to make to
// deploy/ before `kubectl apply -f deploy/`: nothing else changes.
type DeployEdits struct {
	// Image replaces every prober container's image.
	Image string
	// APIServerLB is the address kubelets use for the API server (the
	// matrix's kubernetes.apiServerLB); unset: left commented out.
	APIServerLB netip.AddrPort
	// Hops names the fabric's devices in the matrix's config (hops:).
	Hops map[string]string
}

// Names in deploy/ the edits address.
const (
	deployImagePrefix  = "ghcr.io/netprober/prober:"
	agentConfigMap     = "prober-agent"
	nodeAgentConfigKey = "node.yaml"
	matrixConfigMap    = "prober-matrix"
	matrixConfigKey    = "matrix.yaml"
)

// RenderDeploy reads the manifests at the top of dir, as `kubectl apply -f
// dir` does (not its subdirectories), applies the edits and writes each
// file under the same name into out. It fails when an edit finds nothing
// to change: a renamed ConfigMap or image would otherwise go unnoticed.
func RenderDeploy(dir, out string, e DeployEdits) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("deploy: no manifests in %s", dir)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var images, lb, hops int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var docs [][]byte
		for _, doc := range splitYAML(b) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return fmt.Errorf("deploy: %s: %w", f, err)
			}
			if obj == nil {
				continue
			}
			i, l, h, err := editObject(obj, e)
			if err != nil {
				return fmt.Errorf("deploy: %s: %w", f, err)
			}
			images, lb, hops = images+i, lb+l, hops+h
			y, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			docs = append(docs, y)
		}
		if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), bytes.Join(docs, []byte("---\n")), 0o644); err != nil {
			return err
		}
	}
	var errs []error
	if e.Image != "" && images == 0 {
		errs = append(errs, fmt.Errorf("deploy: no container image %s* to replace", deployImagePrefix))
	}
	if e.APIServerLB.IsValid() && lb == 0 {
		errs = append(errs, fmt.Errorf("deploy: no ConfigMap %s with %s to set apiServerLB in", matrixConfigMap, matrixConfigKey))
	}
	if len(e.Hops) > 0 && hops == 0 {
		errs = append(errs, fmt.Errorf("deploy: no ConfigMap %s with %s to set hops in", matrixConfigMap, matrixConfigKey))
	}
	return errors.Join(errs...)
}

// splitYAML splits a multi-document YAML file at its "---" lines.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	var cur []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimRight(line, " ") == "---" {
			docs = append(docs, []byte(strings.Join(cur, "\n")))
			cur = cur[:0]
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, []byte(strings.Join(cur, "\n")))
}

// editObject applies e to one manifest and counts what it changed.
func editObject(obj map[string]any, e DeployEdits) (images, lb, hops int, err error) {
	kind, _ := obj["kind"].(string)
	name, _ := dig(obj, "metadata", "name").(string)
	if kind == "ConfigMap" {
		data, _ := obj["data"].(map[string]any)
		edit := func(key string, fn func(map[string]any)) error {
			s, ok := data[key].(string)
			if !ok {
				return nil
			}
			var cfg map[string]any
			if err := yaml.Unmarshal([]byte(s), &cfg); err != nil {
				return fmt.Errorf("ConfigMap %s: %s: %w", name, key, err)
			}
			fn(cfg)
			y, err := yaml.Marshal(cfg)
			if err != nil {
				return err
			}
			data[key] = string(y)
			return nil
		}
		if name == matrixConfigMap && (e.APIServerLB.IsValid() || len(e.Hops) > 0) {
			err = edit(matrixConfigKey, func(cfg map[string]any) {
				if e.APIServerLB.IsValid() {
					k, _ := cfg["kubernetes"].(map[string]any)
					if k == nil {
						k = map[string]any{}
						cfg["kubernetes"] = k
					}
					k["apiServerLB"] = e.APIServerLB.String()
					lb++
				}
				if len(e.Hops) > 0 {
					cfg["hops"] = e.Hops
					hops++
				}
			})
		}
		return images, lb, hops, err
	}
	containers, _ := dig(obj, "spec", "template", "spec", "containers").([]any)
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		if img, _ := cm["image"].(string); e.Image != "" && strings.HasPrefix(img, deployImagePrefix) {
			cm["image"] = e.Image
			images++
		}
	}
	return images, lb, hops, nil
}

// dig walks nested maps by key.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// DeployProbing returns the probing block of the node agents'
// configuration (ConfigMap prober-agent, node.yaml) in the manifest file
// path, such as deploy/daemonset.yaml: what measurements at the deployed
// schedule run with.
func DeployProbing(path string) (config.Probing, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return config.Probing{}, err
	}
	for _, doc := range splitYAML(b) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return config.Probing{}, fmt.Errorf("%s: %w", path, err)
		}
		if obj["kind"] != "ConfigMap" || dig(obj, "metadata", "name") != agentConfigMap {
			continue
		}
		s, _ := dig(obj, "data", nodeAgentConfigKey).(string)
		var c config.Agent
		if err := yaml.UnmarshalStrict([]byte(s), &c); err != nil {
			return config.Probing{}, fmt.Errorf("%s: ConfigMap %s: %s: %w", path, agentConfigMap, nodeAgentConfigKey, err)
		}
		if c.Probing.Interval == 0 || len(c.Probing.Protocols) == 0 {
			return config.Probing{}, fmt.Errorf("%s: ConfigMap %s: %s has no probing block", path, agentConfigMap, nodeAgentConfigKey)
		}
		return c.Probing, nil
	}
	return config.Probing{}, fmt.Errorf("%s: no ConfigMap %s", path, agentConfigMap)
}
