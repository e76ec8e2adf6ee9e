"""`make charts`: pull each Helm chart a stack installs once, verified, into the project's chart cache
(gpu_tenancy/contract/chart_lock.py), so that previews and updates install from it without a network."""
