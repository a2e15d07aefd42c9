"""Every model endpoint a sweep will call, asked once before its first job with a request
that costs nothing (each provider's ``ChatModel.probe``: Anthropic's and an
OpenAI-compatible server's model list), so a server that is down, a wrong URL or a refused
key stops the sweep at once, naming the key to fix, instead of after minutes of retries
per job. ``runner.check_endpoints=false`` skips it (a run answered from the response cache
alone needs no server)."""

from __future__ import annotations

import logging
from typing import Any

from arag.llm import make_model
from arag.llm.registry import PROVIDERS
from runners.settings import Settings
from runners.validation import ConfigError

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 15.0  # a server that answers at all answers its model list in this
# failures that say the endpoint answers (busy, rate-limited): the jobs' retries handle them
ANSWERING = ("rate_limit", "overloaded", "server", "conflict")
_FIXES = {
    "connection": "start the server or correct {key} (null: the provider's own API)",
    "timeout": "check that {key} is the server's address and that it is up",
    "not_found": "correct {key}: the server has no model list there (an OpenAI-compatible "
                 "URL usually ends in /v1)",
    "auth": "export a valid key in {env}",
    "permission": "use a key in {env} that may call this API",
}


class EndpointUnreachable(ConfigError):
    """An endpoint of the sweep did not answer, or refused its key."""


def endpoints(job: Settings) -> dict[str, Any]:
    """The model config nodes a job calls, by the key that sets each one's server
    (``model.base_url``, ``judge.base_url``, ...)."""
    cfg = job.config
    nodes: dict[str, Any] = {} if cfg.mode == "evaluate" else {"model.base_url": cfg.model}
    nodes["judge.base_url"] = cfg.judge
    nodes.update({f"judge.panel={name} (judge.base_url)": node
                  for name, node in job.panel.items()})
    if cfg.dataset.reference_model is not None:
        nodes["dataset.reference_model.base_url"] = cfg.dataset.reference_model
    return {key: node for key, node in nodes.items() if str(node.provider) != "none"}


def check_endpoints(jobs: list[Settings]) -> None:
    """Each distinct endpoint of ``jobs`` answers; else EndpointUnreachable naming the key,
    what it answered and the fix. An endpoint that answers busy is logged and kept."""
    asked: set[tuple[str, ...]] = set()
    for job in jobs:
        for key, node in endpoints(job).items():
            where = (str(node.provider), str(node.base_url or ""),
                     str(getattr(node, "api_key_env", "") or ""))
            if where in asked:
                continue
            asked.add(where)
            _probe(key, node)


def _probe(key: str, node: Any) -> None:
    model = make_model(node)
    failure = model.probe(min(PROBE_TIMEOUT_S, float(node.timeout_s)))
    if failure is None:
        return
    shown = node.base_url or "the provider's own API"
    if failure.kind in ANSWERING:
        log.warning("%s=%s answered %s: the jobs retry such replies", key, shown,
                    failure.message)
        return
    env = " or ".join(PROVIDERS.get(str(node.provider)).required_env_vars(node)) or \
        "the provider's key variable"
    fix = _FIXES.get(failure.kind, "correct {key}").format(key=key, env=env)
    raise EndpointUnreachable(
        f"{key}={shown} ({node.name}, provider {node.provider}) did not answer a free "
        f"request for its model list: {failure.message[:300]}. No job ran. Fix: {fix}; "
        "runner.check_endpoints=false skips this check")
