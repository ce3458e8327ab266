// Command kube-apiserver is the upstream kube-apiserver, built from the
// module proxy at the version pinned in hack/kube/go.mod.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
