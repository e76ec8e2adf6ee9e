"""`python -m gpu_tenancy.cli.tenants`."""

import sys

from gpu_tenancy.cli.tenants.command import main

sys.exit(main())
