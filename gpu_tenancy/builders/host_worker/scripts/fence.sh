#!/usr/bin/env bash
# Fences this GPU host off from the other tenants (gpu-tenancy, mode real). Safe to run again.
set -euo pipefail
command -v nft >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables; }
install -d -m 0755 /etc/gpu-tenancy
rules=$(mktemp)
trap 'rm -f "$rules"' EXIT
cat > "$rules"
nft -c -f "$rules"
install -m 0644 "$rules" @RULES_FILE@
cat > /etc/systemd/system/@UNIT@ <<'UNIT'
[Unit]
Description=gpu-tenancy: fence this GPU host off from the other tenants
Before=kubelet.service
After=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/nft -f @RULES_FILE@
ExecStop=/usr/sbin/nft delete table inet @TABLE@

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable @UNIT@ >/dev/null
nft -f @RULES_FILE@
