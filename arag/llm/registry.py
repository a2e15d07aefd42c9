"""The provider catalogue: each provider registers by name with the credentials it reads
from the environment; a model config picks one with ``provider:``.

Provider modules import their SDK only when a model is built, so the catalogue (and the
credential check before a run) works without any SDK installed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arag.llm.base import ChatModel, MissingCredentials
from arag.registry import Registry, origin_of

ProviderFactory = Callable[[Any], ChatModel]
ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Provider:
    name: str
    factory: ProviderFactory
    env_vars: tuple[str, ...] = ()  # credentials, read from the environment only
    judges: bool = True  # its models can act as the judge (the offline model cannot)
    # config keys whose value, when set, names a further variable holding a credential
    # (``model.api_key_env: OPENAI_API_KEY``): the config picks the variable, never the value
    env_var_keys: tuple[str, ...] = ()
    # the highest sampling temperature its API accepts (Anthropic 1, OpenAI 2); None: any
    max_temperature: float | None = None

    def required_env_vars(self, model_cfg: Any = None) -> tuple[str, ...]:
        """The variables a model of this provider, configured by ``model_cfg``, reads.

        A value of an ``env_var_keys`` key that is not a variable name (a key pasted in by
        mistake) is refused without being repeated, so it reaches no message or log.
        """
        named = {k: str(getattr(model_cfg, k)) for k in self.env_var_keys
                 if getattr(model_cfg, k, None)}
        for key, value in named.items():
            if not ENV_VAR_NAME.fullmatch(value):
                raise MissingCredentials(
                    f"{key} must name an environment variable (letters, digits and _, e.g. "
                    f"{key}=OPENAI_API_KEY), not hold the key itself; export the key under "
                    "that name")
        return (*self.env_vars, *named.values())

    def missing_env_vars(self, model_cfg: Any = None) -> list[str]:
        return [v for v in self.required_env_vars(model_cfg) if not os.environ.get(v, "").strip()]


PROVIDERS: Registry[Provider] = Registry("provider", "model.provider", "arag.llm",
                                         group="arag_eval.providers")


def register_provider(name: str, env_vars: tuple[str, ...] = (), judges: bool = True,
                      env_var_keys: tuple[str, ...] = (), max_temperature: float | None = None
                      ) -> Callable[[ProviderFactory], ProviderFactory]:
    def decorate(factory: ProviderFactory) -> ProviderFactory:
        PROVIDERS.register(name, origin_of(factory))(Provider(name, factory, env_vars, judges,
                                                              env_var_keys, max_temperature))
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
        missing = provider.missing_env_vars(node)
        if missing:
            names = " and ".join(missing)
            raise MissingCredentials(
                f"{choice} (provider {provider.name}) needs {names} in the environment: "
                f"export {missing[0]}=... (credentials are never read from a config file or "
                f"a URL), or choose a model that needs none (model=offline, judge=none)")


@register_provider("none", judges=False)
def _no_model(cfg: Any) -> ChatModel:
    raise ValueError(f"{cfg.name!r} names no model (provider none); choose a model option")
