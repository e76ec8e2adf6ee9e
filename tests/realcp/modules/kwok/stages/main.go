// Command stages prints the stages kwokctl gives a cluster by default (sigs.k8s.io/kwok
// pkg/kwokctl/runtime/cluster.go getDefaultNodeStages and getDefaultPodStages, without a lease), so the kwok
// controller started by the tests runs upstream's node and pod lifecycle, not one written here.
package main

import (
	"fmt"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	for _, stage := range []string{nodefast.DefaultNodeInit, nodeheartbeat.DefaultNodeHeartbeat,
		podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete} {
		fmt.Printf("---\n%s\n", stage)
	}
}
