// Command kubelet is the upstream kubelet, built from the module proxy at
// the version pinned in hack/kube/go.mod, for the real-cluster harness.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
