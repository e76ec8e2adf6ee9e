"""The stack contract: what a stack file declares, validated, and the versions it pins."""
