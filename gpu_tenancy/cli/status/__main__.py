"""`python -m gpu_tenancy.cli.status`: `gpu-tenancy status`, for benchmarks/status_bench.py, which runs it so."""

import sys

from gpu_tenancy.cli.base_command import run

sys.exit(run("status", sys.argv[1:]))
