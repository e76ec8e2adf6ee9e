"""No secret reaches `pulumi up`'s log: a command whose stdout the program keeps secret does not log it.

pulumi-command logs a command's stdout and stderr unless its `logging` input says otherwise (pulumi-command
`provider/pkg/provider/local/logging.go` `ShouldLogStdout`: no `logging`, logged; `commandOutputs.go` `run`
logs each line as it comes, secret or not). `additionalSecretOutputs` hides the captured output in the state,
not what was already printed.
"""

from __future__ import annotations

import pytest
from policy_support import EXAMPLE_STACKS

# Each command whose stdout is secret, and what it logs: "none" for the management cluster's kubeconfig,
# "stderr" for a bootstrap token's mint (its errors help, its stdout is the token).
SECRET_STDOUT_LOGGING = {
    "dev": {"management-kubeconfig": "none"},
    "dev-nvml": {"management-kubeconfig": "none"},
    "gpu": {
        "tenant-a-gpu-a100-01-bootstrap-token-mint": "stderr",
        "tenant-b-gpu-l4-01-bootstrap-token-mint": "stderr",
    },
}


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_a_command_whose_stdout_is_secret_does_not_log_it(stack: str) -> None:
    secret_stdout = {
        resource.name: resource.inputs.get("logging")
        for resource in EXAMPLE_STACKS[stack]()
        if resource.type.startswith("command:") and "stdout" in resource.additional_secret_outputs
    }
    assert secret_stdout == SECRET_STDOUT_LOGGING[stack]
