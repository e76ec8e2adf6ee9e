"""The exit codes of every `gpu-tenancy` command, in one table.

Standard library only, as the rest of the command line's base: `make tools` runs before the venv exists.
"""

from __future__ import annotations

SUCCESS = 0
# The command ran and its answer is no: a replica fits in no order, a tenant is unhealthy or unreachable, the
# doctor found a problem, a promotion changes the plan, a download or a pulumi call failed.
FAILURE = 1
# The command line or an input file is wrong: one line on stderr naming what and how to fix it.
USAGE = 2
# plan: every replica fits in some order, but some only in some orders (advisory, as policy gpu-plan-order).
DEPENDS = 3
# An error no command expected: a bug, or a dependency missing from the environment (sysexits.h EX_SOFTWARE).
INTERNAL_ERROR = 70
INTERRUPTED = 128 + 2  # what a shell reports for SIGINT (Ctrl-C)
BROKEN_PIPE = 128 + 13  # ... for SIGPIPE: `gpu-tenancy plan ... | head` stops quietly

MEANING = {
    SUCCESS: "success (plan: fits whatever the order; tenants: all healthy; doctor: no problem)",
    FAILURE: "the answer is no (plan: a replica fits in no order; doctor: a problem), or a read failed",
    USAGE: "bad command line or input (one line naming it)",
    DEPENDS: "plan: a replica fits in some orders only",
    INTERNAL_ERROR: "internal error (one line; GPU_TENANCY_DEBUG=1 shows the traceback)",
    INTERRUPTED: "interrupted (Ctrl-C)",
    BROKEN_PIPE: "the reader of the output went away (`| head`)",
}
