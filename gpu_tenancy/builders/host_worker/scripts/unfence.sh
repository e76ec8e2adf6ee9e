#!/usr/bin/env bash
# Removes the gpu-tenancy host firewall. Safe to run again.
set -uo pipefail
systemctl disable --now @UNIT@ >/dev/null 2>&1 || true
nft delete table inet @TABLE@ 2>/dev/null || true
rm -f /etc/systemd/system/@UNIT@ @RULES_FILE@
systemctl daemon-reload
