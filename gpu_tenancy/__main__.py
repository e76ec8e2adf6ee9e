"""`python -m gpu_tenancy <command>`: the same as the installed `gpu-tenancy <command>`, without installing."""

import sys

from gpu_tenancy.cli.main import main

sys.exit(main())
