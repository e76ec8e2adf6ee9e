"""Print (or with --write, store) the fields the program sets on the types that run code or reach a host, by the
component that makes them: policies/allowed_fields.json, which `field-allowlist` holds every stack to.

The union over the example stacks (deployed and in a first preview) and every sampled setting of every config key
(tests/test_config_reference.py SAMPLES). Review the difference before writing it: each new path is a field a
pull request could then set on that kind.

    .venv/bin/python tests/allowed_fields.py           # the difference to the committed file
    .venv/bin/python tests/allowed_fields.py --write
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent
for path in (TESTS.parent, TESTS, TESTS.parent / "policies"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import fields_lib  # noqa: E402
import test_config_reference as reference  # noqa: E402
from policy_support import EXAMPLE_STACKS, Recorded, resource_args  # noqa: E402
from resource_lib import from_resource_args  # noqa: E402


def collect(stack: list[Recorded], into: dict[str, set[str]]) -> None:
    for record in stack:
        if record.read:
            continue
        res = from_resource_args(resource_args(stack, record))  # the pack's own view of the inputs
        if fields_lib.field_checked(res):
            into[fields_lib.allowlist_key(res)].update(p for p in fields_lib.paths(res.props) if p)


def program_fields() -> dict[str, list[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for stack in EXAMPLE_STACKS.values():
        collect(stack(), found)
        collect(stack(True), found)
    for name, make in reference.CONFIGS.items():
        collect(reference._record(name, make()), found)
    for samples in reference.SAMPLES.values():
        for name, change, _ in samples:
            settings = reference.CONFIGS[name]()
            change(settings)
            collect(reference._record("gpu" if name == "gpu-nodeport" else name, settings), found)
    return {key: sorted(fields) for key, fields in sorted(found.items())}


def main() -> int:
    fields = program_fields()
    committed = json.loads(fields_lib.ALLOWED_FIELDS.read_text())
    for key in sorted(set(fields) | set(committed)):
        for path in sorted(set(fields.get(key, [])) - set(committed.get(key, []))):
            print(f"+ {key} {path}")
        for path in sorted(set(committed.get(key, [])) - set(fields.get(key, []))):
            print(f"- {key} {path}")
    if "--write" in sys.argv[1:]:
        fields_lib.ALLOWED_FIELDS.write_text(json.dumps(fields, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
