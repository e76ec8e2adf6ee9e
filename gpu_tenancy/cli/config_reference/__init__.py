"""The configuration reference, docs/configuration.md, generated from the stack config's models.

Types, bounds and defaults come from the JSON schema of the stack file's pydantic models
(`gpu_tenancy.contract.stack_config` and its sections; the pins from `gpu_tenancy.contract.versions`, the cards
from `gpu_tenancy.hami.gpu_catalogue`), read by `model_fields`, so the page cannot drift from what `load_config`
accepts. What each key does and what changing it does to a deployed stack are written in `keys`, as data (`KEYS`,
`QUOTA`), beside the resources a change replaces (`Key.replaces`, checked against the engine's replacement rules by
tests/test_config_reference.py): they describe a deployed stack, not a field, so they are not `Field(description=)`.
Every key the models accept must have an entry, and every entry must name a key; `page` lays them out.

    gpu-tenancy config-reference           # print the page
    gpu-tenancy config-reference --write   # rewrite docs/configuration.md
"""
