// Command etcd builds the etcd server from go.etcd.io/etcd/server/v3 at the
// version pinned in ../../go.mod (etcd's own root module uses replace
// directives, so it cannot be `go install`ed directly).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
