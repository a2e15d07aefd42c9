"""Systems under evaluation: question -> Prediction."""

from arag.systems.base import System, SystemContext
from arag.systems.builtin import SYSTEMS, AgenticRAG, NaiveRAG, Stuffing
from arag.systems.calls import CallLog


def make_system(kind: str, name: str, ctx: SystemContext) -> System:
    try:
        cls = SYSTEMS[kind]
    except KeyError:
        raise ValueError(f"system.kind={kind!r} is unknown; choose one of {sorted(SYSTEMS)}") from None
    return cls(name, ctx)


__all__ = ["SYSTEMS", "AgenticRAG", "CallLog", "NaiveRAG", "Stuffing", "System",
           "SystemContext", "make_system"]
