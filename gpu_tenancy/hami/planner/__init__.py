"""Pure GPU capacity planner modelled on HAMi v2.10.0's NVIDIA scheduling.

Re-implemented from HAMi v2.10.0 (read at the tag, none of it copied): pkg/device/nvidia/device.go
(``Fit``, ``GenerateResourceRequests``, ``defaultExclusiveCoreIfNeeded``, ``validateMemoryPercentage``),
pkg/scheduler/score.go (``fitInDevices``), pkg/scheduler/policy/gpu_policy.go (``Less``,
``ComputeScore``) and node_policy.go (``ComputeDefaultScore``).  Given node inventories (shaped like HAMi's
``hami.io/node-nvidia-register`` annotation) and a set of workloads, ``schedule.plan``
places every replica the way the HAMi scheduler extender would and reports the
replicas that do not fit, with HAMi's own reason strings (``"n/N Reason, ..."``).

- ``model``: what a plan takes: GPUs, nodes, container requests, workloads, quotas, and nodes read from
  HAMi's register annotation.
- ``fit``: HAMi's fit rules on one node: the scores that order cards, which card each container slice
  lands on, the reasons a card is refused.
- ``schedule``: the scheduling loop, ``plan``: node order, admission against the quota, what does not fit.
- ``report``: what a plan gives: placements, and failures with their reasons.
- ``orders``: per replica, fits whatever order Kubernetes and HAMi take, in none, or depends on the order
  (and on what); ``ties`` gives one pod's outcomes under every card tie-break, ``symmetry`` settles large
  groups of identical pods on identical cards.

No Kubernetes, Pulumi or I/O dependencies: everything here is plain data. Import names from the module that
defines them; this package re-exports nothing.
"""
