"""Names the program gives a tenant's workloads, and the HAMi pod annotations it sets: what the status reader and the
pending explanation look for. Kept apart from gpu_tenancy.builders.workloads.workloads (which builds the manifests from
the validated stack config) so that reading a cluster does not load the config models."""

from gpu_tenancy.hami.protocol import NVIDIA

WORKLOAD_NAMESPACE = "workloads"
COMPONENT = "workload"
WORKLOAD_LABEL = "gpu-tenancy.io/workload"
QUOTA_NAME = "gpu-quota"
# Chart value `schedulerName` (hami 2.10.0 default, not overridden in hami_chart.hami_values).
HAMI_SCHEDULER_NAME = "hami-scheduler"

USE_GPU_TYPE_ANNOTATION = NVIDIA.use_type_annotation
NOUSE_GPU_TYPE_ANNOTATION = NVIDIA.nouse_type_annotation
GPU_SCHEDULER_POLICY_ANNOTATION = "hami.io/gpu-scheduler-policy"
NODE_SCHEDULER_POLICY_ANNOTATION = "hami.io/node-scheduler-policy"
# What the HAMi release in this program defaults to (hami_chart.hami_values defaultSchedulerPolicy).
DEFAULT_GPU_SCHEDULER_POLICY = "spread"
DEFAULT_NODE_SCHEDULER_POLICY = "binpack"
