// Command hello is the binary hack/image's test puts in an image: small,
// so building it for two architectures is quick.
package main

import "fmt"

func main() { fmt.Println("hello") }
