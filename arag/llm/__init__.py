"""Chat models: one interface, providers registered by name, pricing."""

from arag.llm.base import ChatModel, Completion, Message, ModelError, ToolSpec, Usage
from arag.llm.pricing import Prices
from arag.llm.registry import make_model, register_provider

__all__ = [
    "ChatModel", "Completion", "Message", "ModelError", "Prices", "ToolSpec", "Usage",
    "make_model", "register_provider",
]
