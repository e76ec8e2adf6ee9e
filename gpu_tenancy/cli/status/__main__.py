"""`python -m gpu_tenancy.cli.status`."""

import sys

from gpu_tenancy.cli.status.command import main

sys.exit(main())
