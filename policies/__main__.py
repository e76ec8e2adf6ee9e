"""Entry point the Pulumi engine runs (`python __main__.py <engine-address>`, cwd = policies/).

Keep it thin: constructing PolicyPack starts the analyzer gRPC server and blocks forever, so the
policies live in the group modules that tenant_policies.py collects, where tests import them.
"""

import sys
from pathlib import Path

# The engine starts the pack with policies/ as the working directory and script directory, so only
# policies/ is on sys.path; gpu-plan-fits also needs the project's own modules (gpu_tenancy.hami.planner).
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack
from tenant_policies import ALL_POLICIES

PolicyPack(
    "gpu-tenancy",
    ALL_POLICIES,
    enforcement_level=EnforcementLevel.MANDATORY,
    description="Tenant isolation and safe GPU use for gpu-tenancy stacks.",
)
