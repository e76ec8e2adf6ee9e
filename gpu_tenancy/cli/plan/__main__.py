"""`python -m gpu_tenancy.cli.plan`: `gpu-tenancy plan`, as the stack files' comments name it."""

import sys

from gpu_tenancy.cli.base_command import run

sys.exit(run("plan", sys.argv[1:]))
