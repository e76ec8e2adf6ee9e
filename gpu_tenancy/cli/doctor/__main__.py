"""`python -m gpu_tenancy.cli.doctor`."""

import sys

from gpu_tenancy.cli.doctor.command import main

sys.exit(main())
