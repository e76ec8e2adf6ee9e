"""`python -m gpu_tenancy.cli.doctor`: `gpu-tenancy doctor`, for the live suite's fault checks, which run it so."""

import sys

from gpu_tenancy.cli.base_command import run

sys.exit(run("doctor", sys.argv[1:]))
