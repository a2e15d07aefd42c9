"""What ``run.py`` does before Hydra reads the command line: URL credentials are
redacted (``arag.redact``), and an unknown config key is answered with the closest known
key instead of Hydra's ``+key=value`` (which would add a key nothing reads)."""

from __future__ import annotations

import difflib
import re
import sys
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.redact import stash_credentials


def prepare_command_line() -> None:
    sys.argv = stash_credentials(sys.argv)
    suggest_closest_keys()


def suggest_closest_keys() -> None:
    """Wrap Hydra's override step so an unknown key's error names the closest known key."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.errors import ConfigCompositionException

    original = ConfigLoaderImpl._apply_overrides_to_config
    if getattr(original, "suggests_keys", False):
        return

    def apply(overrides: list[Any], cfg: DictConfig) -> None:
        try:
            original(overrides, cfg)
        except ConfigCompositionException as exc:
            unknown = re.match(r"Could not override '([^']+)'", str(exc))
            if unknown is None:
                raise
            line = next((o.input_line for o in overrides
                         if o.key_or_group == unknown.group(1)), unknown.group(1))
            raise ConfigCompositionException(unknown_key_message(line, cfg)) from None

    apply.suggests_keys = True  # type: ignore[attr-defined]
    ConfigLoaderImpl._apply_overrides_to_config = staticmethod(apply)  # type: ignore[method-assign]


def unknown_key_message(override: str, cfg: DictConfig) -> str:
    key, _, value = override.partition("=")
    known = [k for k in dotted_keys(OmegaConf.to_container(cfg, resolve=False))
             if key.startswith("hydra.") or not k.startswith("hydra.")]
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    if close:
        fix = f"Did you mean {close[0]}? Fix: {close[0]}={value}" + (
            f" (other close keys: {', '.join(close[1:])})" if close[1:] else "")
    else:
        top = sorted({k.split('.')[0] for k in known})
        fix = f"The top-level keys are: {', '.join(top)}"
    return f"{key} is not a config key. {fix}"


def dotted_keys(data: Any, prefix: str = "") -> list[str]:
    """Every leaf key of a nested config, dotted (``retrieval.top_k``)."""
    out = []
    for k, v in data.items():
        out.extend(dotted_keys(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"])
    return out
