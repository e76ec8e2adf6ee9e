"""`python -m gpu_tenancy.cli.promotion`."""

import sys

from gpu_tenancy.cli.promotion.command import main

sys.exit(main())
