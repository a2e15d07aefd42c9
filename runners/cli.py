"""What ``run.py`` does before Hydra reads the command line: URL credentials are
redacted (``arag.redact``), an unknown config key is answered with the closest known key
instead of Hydra's ``+key=value`` (which would add a key nothing reads), and an unknown
value (``system=naiv``, ``dataset=ectsun``, ``retrieval.scope=documnt``) with the closest
valid one."""

from __future__ import annotations

import difflib
import re
import sys
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.redact import stash_credentials

# what Ctrl-C prints (and exit status 130, the shell's for SIGINT): every answer written
# before it is kept, so the same command goes on from there
INTERRUPTED = "interrupted: run the same command to resume"
INTERRUPTED_EXIT = 130


def prepare_command_line() -> None:
    sys.argv = stash_credentials(sys.argv)
    sys.argv = listed_values(sys.argv)
    suggest_closest_keys()
    suggest_closest_options()


def list_keys() -> set[str]:
    """Every config key the schema types as a list (``report.slice_by``, ``system.tools``)."""
    import dataclasses
    import typing

    from runners.config import RunConfig

    def walk(cls: type, prefix: str) -> set[str]:
        out: set[str] = set()
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = hints.get(f.name)
            if typing.get_origin(kind) is list:
                out.add(prefix + f.name)
            elif isinstance(kind, type) and dataclasses.is_dataclass(kind):
                out |= walk(kind, f"{prefix}{f.name}.")
        return out

    return walk(RunConfig, "")


def listed_values(argv: list[str]) -> list[str]:
    """A list key given a bare value (``report.slice_by=document_tokens``, or ``a,b``) takes
    it as the list it means (``[document_tokens]``), where Hydra would refuse it ("str is
    not a ListConfig") or sweep it value by value."""
    keys = list_keys()
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        bare = value and not value.startswith(("[", "'", '"', "${")) and "(" not in value
        out.append(f"{key}=[{value}]" if sep and key in keys and bare else arg)
    return out


def interrupted() -> int:
    """Say that Ctrl-C stopped the command and how to go on; the exit status."""
    print(f"\n{INTERRUPTED}", file=sys.stderr, flush=True)
    return INTERRUPTED_EXIT


def suggest_closest_options() -> None:
    """Wrap Hydra's "Could not find 'system/naiv'" so it opens with the closest option of
    the group and the fix (and, for a dataset, where the real datasets come from)."""
    from hydra._internal import defaults_list
    from hydra.errors import MissingConfigException

    original = defaults_list.config_not_found_error
    if getattr(original, "suggests_options", False):
        return

    def not_found(repo: Any, tree: Any) -> None:
        try:
            original(repo, tree)
        except MissingConfigException as exc:
            group, _, name = (exc.missing_cfg_file or "").rpartition("/")
            if not group or not exc.options:
                raise
            raise MissingConfigException(
                f"{unknown_option_message(group, name, list(exc.options))}\n\n{exc}",
                missing_cfg_file=exc.missing_cfg_file, options=exc.options) from None

    not_found.suggests_options = True  # type: ignore[attr-defined]
    defaults_list.config_not_found_error = not_found


def unknown_option_message(group: str, name: str, options: list[str],
                           command_line: list[str] | None = None) -> str:
    """``system=naiv is not a system. Did you mean naive? Fix: system=naive``; in a sweep
    list the fix keeps the other values (``Fix: system=arag,naive``)."""
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.5)
    fix = (f"Did you mean {close[0]}? Fix: {fixed(group, name, close[0], command_line)}" if close
           else f"The options are: {', '.join(options)}")
    extra = (" (A real dataset also needs its files: `make data` links them into "
             "data/datasets/; docs/datasets.md)" if group == "dataset" else "")
    return f"{group}={name} is not a {group.split('/')[-1]} option. {fix}{extra}"


_INVALID_VALUE = re.compile(r"Invalid value '([^']*)', expected one of \[([^\]]*)\]")


def unknown_value_message(override: str, error: str,
                          command_line: list[str] | None = None) -> str | None:
    """``retrieval.scope=documnt``: the closest of the values the schema allows."""
    match = _INVALID_VALUE.search(error)
    if match is None:
        return None
    key = override.partition("=")[0]
    valid = [v.strip() for v in match.group(2).split(",")]
    close = difflib.get_close_matches(match.group(1), valid, n=1, cutoff=0.5)
    fix = f"Did you mean {close[0]}? Fix: {fixed(key, match.group(1), close[0], command_line)}" \
        if close else \
        f"Fix: {key}=<one of {', '.join(valid)}>"
    return f"{override}: {key} takes one of {', '.join(valid)}. {fix}"


def fixed(key: str, wrong: str, right: str, command_line: list[str] | None = None) -> str:
    """The override that fixes ``key=wrong``, as typed on the command line: a sweep list
    (``system=arag,naiv``) keeps its other values (``system=arag,naive``), since Hydra
    reports the one job whose value is wrong."""
    for arg in sys.argv[1:] if command_line is None else command_line:
        typed_key, _, values = arg.partition("=")
        listed = values.split(",")
        if typed_key.lstrip("+~") == key and len(listed) > 1 and wrong in listed:
            return f"{typed_key}={','.join(right if v == wrong else v for v in listed)}"
    return f"{key}={right}"


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
                bad = re.match(r"Error merging override (\S+)", str(exc))
                better = unknown_value_message(bad.group(1), f"{exc} {exc.__cause__}") \
                    if bad else None
                if better is None:
                    raise
                raise ConfigCompositionException(f"{better}\n\n{exc}") from None
            line = next((o.input_line for o in overrides
                         if o.key_or_group == unknown.group(1)), unknown.group(1))
            raise ConfigCompositionException(unknown_key_message(line, cfg)) from None

    apply.suggests_keys = True  # type: ignore[attr-defined]
    ConfigLoaderImpl._apply_overrides_to_config = staticmethod(apply)  # type: ignore[method-assign]


def unknown_key_message(override: str, cfg: DictConfig) -> str:
    key, _, value = override.partition("=")
    parent = key.rpartition(".")[0]
    node = OmegaConf.select(cfg, parent) if parent and not key.startswith("+") else None
    if isinstance(node, DictConfig) and OmegaConf.get_type(node) is dict:
        # a map whose keys are the user's (report.equivalence_margin): a new key takes "+"
        return (f"{key} is a new key of the map {parent}, which Hydra adds only with \"+\". "
                f"Fix: +{key}={value}")
    group = closest_group(key)
    if group is not None:
        return group_message(key, group, _as_typed(key, value))
    known = [k for k in dotted_keys(OmegaConf.to_container(cfg, resolve=False))
             if key.startswith("hydra.") or not k.startswith("hydra.")]
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    if close:
        fix = f"Did you mean {close[0]}? Fix: {close[0]}={_acceptable(cfg, close[0], value)}" + (
            f" (other close keys: {', '.join(close[1:])})" if close[1:] else "")
    else:
        top = sorted({k.split('.')[0] for k in known})
        fix = f"The top-level keys are: {', '.join(top)}"
    return f"{key} is not a config key. {fix}"


def _acceptable(cfg: DictConfig, key: str, value: str) -> str:
    """The value to suggest with a corrected key: the one typed, unless that key would refuse
    it too (a fix must never be refused), then its default and why."""
    from runners.validation import refusal

    refused = refusal(cfg, key, value)
    if refused is None:
        return value
    must, default = refused
    return f"{default} ({value} is refused there too: it must be {must})"


def closest_group(key: str) -> str | None:
    """The config group a misspelled top-level key most likely means (``sytem`` ->
    ``system``): a group takes an option name, so its fix is ``system=naive``, not a key
    inside the group (``system.name=naive`` would run the default system under that name)."""
    from hydra.core.global_hydra import GlobalHydra

    if "." in key or "/" in key or not GlobalHydra.instance().is_initialized():
        return None
    groups = GlobalHydra.instance().config_loader().list_groups("")
    close = difflib.get_close_matches(key, [g for g in groups if g != "hydra"], n=1, cutoff=0.6)
    return close[0] if close else None


def group_message(key: str, group: str, value: str) -> str:
    """``sytem=arag,naiv``: ``Fix: system=arag,naive`` (each item of a sweep list mended)."""
    from hydra.core.global_hydra import GlobalHydra

    options = GlobalHydra.instance().config_loader().get_group_options(group)
    fixed = [next(iter(difflib.get_close_matches(item, options, n=1, cutoff=0.5)), item)
             for item in value.split(",")]
    return (f"{key} is not a config key. Did you mean the config group {group}? "
            f"Fix: {group}={','.join(fixed)}")


def _as_typed(key: str, value: str) -> str:
    """The value as the user typed it: a sweep composes each job with one item of
    ``sytem=arag,naiv``, but the fix should keep the whole list."""
    typed = next((arg.partition("=")[2] for arg in sys.argv[1:] if arg.startswith(f"{key}=")), None)
    return typed if typed else value


def dotted_keys(data: Any, prefix: str = "") -> list[str]:
    """Every leaf key of a nested config, dotted (``retrieval.top_k``)."""
    out = []
    for k, v in data.items():
        out.extend(dotted_keys(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"])
    return out
