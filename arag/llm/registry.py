"""Providers register by name; a model config picks one with ``provider:``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arag.llm.base import ChatModel

ProviderFactory = Callable[[Any], ChatModel]
_PROVIDERS: dict[str, ProviderFactory] = {}


def register_provider(name: str) -> Callable[[ProviderFactory], ProviderFactory]:
    def decorate(factory: ProviderFactory) -> ProviderFactory:
        _PROVIDERS[name] = factory
        return factory

    return decorate


def make_model(model_cfg: Any) -> ChatModel:
    """Build the model a ``model``/``judge`` config names (SDKs are imported lazily)."""
    _load_builtin_providers()
    try:
        factory = _PROVIDERS[model_cfg.provider]
    except KeyError:
        known = ", ".join(sorted(_PROVIDERS))
        raise ValueError(
            f"model.provider={model_cfg.provider!r} is not a known provider; choose one of: {known}"
        ) from None
    return factory(model_cfg)


def _load_builtin_providers() -> None:
    # importing registers them; each provider module imports its SDK only when called
    from arag.llm import claude, offline, scripted  # noqa: F401
