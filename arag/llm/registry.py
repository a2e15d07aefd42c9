"""The provider catalogue: each provider registers by name with the credentials it reads
from the environment; a model config picks one with ``provider:``.

Provider modules import their SDK only when a model is built, so the catalogue (and the
credential check before a run) works without any SDK installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arag.llm.base import ChatModel, MissingCredentials
from arag.registry import Registry, origin_of

ProviderFactory = Callable[[Any], ChatModel]


@dataclass(frozen=True)
class Provider:
    name: str
    factory: ProviderFactory
    env_vars: tuple[str, ...] = ()  # credentials, read from the environment only
    judges: bool = True  # its models can act as the judge (the offline model cannot)

    def missing_env_vars(self) -> list[str]:
        return [v for v in self.env_vars if not os.environ.get(v, "").strip()]


PROVIDERS: Registry[Provider] = Registry("provider", "model.provider", "arag.llm",
                                         group="arag_eval.providers")


def register_provider(name: str, env_vars: tuple[str, ...] = (), judges: bool = True
                      ) -> Callable[[ProviderFactory], ProviderFactory]:
    def decorate(factory: ProviderFactory) -> ProviderFactory:
        PROVIDERS.register(name, origin_of(factory))(Provider(name, factory, env_vars, judges))
        return factory

    return decorate


def make_model(model_cfg: Any) -> ChatModel:
    """Build the model a ``model``/``judge`` config names (SDKs are imported lazily)."""
    provider = PROVIDERS.get(model_cfg.provider)
    model = provider.factory(model_cfg)
    model.judges = provider.judges
    return model


def require_credentials(nodes: dict[str, Any]) -> None:
    """Every provider these config nodes use has its credentials in the environment.

    ``nodes``: what the user chose, as they would write it (``"judge=claude-haiku-4-5"``)
    -> the model config. Raises MissingCredentials naming the choice and the variable.
    """
    for choice, node in nodes.items():
        if node is None:
            continue
        provider = PROVIDERS.get(str(node.provider))
        missing = provider.missing_env_vars()
        if missing:
            names = " and ".join(missing)
            raise MissingCredentials(
                f"{choice} (provider {provider.name}) needs {names} in the environment: "
                f"export {missing[0]}=... (credentials are never read from a config file or "
                f"a URL), or choose a model that needs none (model=offline, judge=none)")


@register_provider("none", judges=False)
def _no_model(cfg: Any) -> ChatModel:
    raise ValueError(f"{cfg.name!r} names no model (provider none); choose a model option")
