// Command kube-proxy is the upstream kube-proxy, built from the module proxy at
// the version pinned in hack/kube/go.mod, for the real-cluster harness.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
