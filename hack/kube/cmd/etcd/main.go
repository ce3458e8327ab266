// Command etcd is the etcd server that k8s.io/kubernetes pins, built from the
// module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
