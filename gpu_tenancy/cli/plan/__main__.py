"""`python -m gpu_tenancy.cli.plan`."""

import sys

from gpu_tenancy.cli.plan.command import main

sys.exit(main())
