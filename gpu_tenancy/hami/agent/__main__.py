"""Entry point: ``python -m gpu_tenancy.hami.agent [--once] [--dry-run]``."""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any

from gpu_tenancy.hami import protocol as hami


def load_inventory(raw: str) -> list[dict[str, Any]]:
    """INVENTORY_JSON holds either a path to a JSON file or the JSON itself (stack-config GPU groups)."""
    text = raw if raw.lstrip().startswith("[") else Path(raw).read_text(encoding="utf-8")
    decoded = json.loads(text)
    if not isinstance(decoded, list):
        raise ValueError("INVENTORY_JSON must be a JSON list of GPU groups")
    return decoded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mock-gpu-agent")
    parser.add_argument("--once", action="store_true", help="reconcile once and exit")
    parser.add_argument("--dry-run", action="store_true", help="log the plan without patching")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    node_name = os.environ["NODE_NAME"]
    tenant = os.environ["TENANT"]
    split_count = int(os.environ.get("SPLIT_COUNT", str(hami.DEFAULT_SPLIT_COUNT)))
    resync_seconds = float(os.environ.get("RESYNC_SECONDS", "30"))
    devices = hami.device_inventory(tenant, load_inventory(os.environ["INVENTORY_JSON"]), split_count)

    from gpu_tenancy.hami.agent.kube import KubeAgent, load_kube_config

    agent = KubeAgent(load_kube_config(), node_name, devices, dry_run=args.dry_run)
    if args.once:
        agent.reconcile_once()
        return 0
    agent.run_forever(resync_seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
