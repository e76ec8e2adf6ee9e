"""What the kubelet decides about a node that the planner and the program both need, in one place."""

from __future__ import annotations

# The kubelet's default maxPods (KubeletConfiguration); the program sets none when it joins a node.
KUBELET_MAX_PODS = 110
