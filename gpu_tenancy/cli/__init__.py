"""The day-two command lines: plan, status, tenants, doctor, kubeconfig, promotion, pull requests."""
