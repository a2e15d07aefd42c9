"""Systems under evaluation: question -> Prediction. Each declares what it is (see base)."""

from arag.systems.base import (
    SYSTEMS,
    RunSetup,
    Sources,
    System,
    SystemContext,
    make_system,
    register_system,
)
from arag.systems.builtin import AgenticRAG, ClosedBook, NaiveRAG, Oracle, Stuffing, gold_passages

__all__ = ["SYSTEMS", "AgenticRAG", "ClosedBook", "NaiveRAG", "Oracle", "RunSetup", "Sources",
           "Stuffing",
           "System", "SystemContext", "gold_passages", "make_system", "register_system"]
