"""`python -m gpu_tenancy.cli.pull_requests`."""

import sys

from gpu_tenancy.cli.pull_requests.report import main

sys.exit(main())
