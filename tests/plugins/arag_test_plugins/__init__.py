"""A package of the kind a user writes: a system, a scorer and the system's YAML, found by
arag-eval through entry points (see pyproject.toml next to it) with no edit of arag-eval."""
