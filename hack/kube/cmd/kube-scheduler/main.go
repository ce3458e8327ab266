// Command kube-scheduler is the upstream kube-scheduler, built from the module proxy at
// the version pinned in hack/kube/go.mod, for the real-cluster harness.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
