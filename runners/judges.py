"""The panel of further judges a run asks (``judge.panel=[claude-sonnet-4-6]``).

Each entry names a ``judge`` config option. It is composed the way Hydra composes the
``judge`` group: ``conf/judge/<name>.yaml`` over the model file its defaults list extends
(``/model@_here_: ...``), typed by ``JudgeConfig``. A panel judge is reached the way the
primary judge is: when it uses the same provider it takes the primary judge's transport
settings (``base_url``, retries, timeouts, rate limits; a ``base_url`` its own file sets
names its server and is kept: a local model beside OpenAI), and it always takes ``batch``,
``batch_timeout_s``, ``samples`` and ``reask_unreadable``, so one switch governs every
judge of a run.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.config import ConfigError, JudgeConfig, compose_option
from tracking.paths import PROJECT_ROOT

TRANSPORT = ("base_url", "max_retries", "retry_base_delay_s", "timeout_s",
             "requests_per_minute", "tokens_per_minute")
SHARED = ("batch", "batch_timeout_s", "samples", "reask_unreadable")
CANNOT_JUDGE = ("none", "offline")


def judge_options() -> list[str]:
    return sorted(p.stem for p in (PROJECT_ROOT / "conf" / "judge").glob("*.yaml"))


def _compose(group: str, name: str) -> DictConfig:
    """``conf/<group>/<name>.yaml`` with the files its defaults list names merged under it."""
    return compose_option(PROJECT_ROOT / "conf", group, name)


def panel_configs(cfg: DictConfig) -> dict[str, DictConfig]:
    """The typed config of each judge ``judge.panel`` names; ConfigError naming
    ``judge.panel`` and the fix for an unknown option, a judge that cannot judge, or one
    that repeats the primary judge."""
    panel = list(cfg.judge.get("panel") or [])
    if panel and cfg.judge.provider in CANNOT_JUDGE:
        raise ConfigError(f"judge.panel={panel} needs a primary judge, but judge="
                          f"{cfg.judge.name}. Fix: judge=claude-haiku-4-5 judge.panel={panel}")
    available = [o for o in judge_options() if o not in CANNOT_JUDGE]
    out: dict[str, DictConfig] = {}
    for name in panel:
        if name not in available:
            raise ConfigError(f"judge.panel: {name!r} is not a judge option that can judge; "
                              f"available: {available}. Fix: judge.panel=[{available[0]}]")
        node = _typed(_compose("judge", name), cfg.judge)
        if (node.provider, node.model_id) == (cfg.judge.provider, cfg.judge.model_id):
            raise ConfigError(f"judge.panel: {name!r} is the primary judge itself (judge="
                              f"{cfg.judge.name}); a panel needs other judges. Fix: "
                              f"judge.panel=[{next(o for o in available if o != name)}]")
        if name in out:
            raise ConfigError(f"judge.panel names {name!r} twice. Fix: list each judge once")
        out[name] = node
    return out


def _typed(node: DictConfig, primary: Any) -> DictConfig:
    shared = {k: primary.get(k) for k in SHARED}
    if node.get("provider") == primary.provider:
        shared.update({k: primary.get(k) for k in TRANSPORT
                       if k != "base_url" or not node.get("base_url")})
    typed = OmegaConf.merge(OmegaConf.structured(JudgeConfig), node, shared, {"panel": []})
    assert isinstance(typed, DictConfig)
    return typed
