"""Every default is written once, in its schema dataclass: no file under conf/ repeats one.
And every option of every config group composes and passes the pre-run checks."""

from __future__ import annotations

import re
import types
from collections.abc import Iterator
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from omegaconf import OmegaConf

from runners.config import RunConfig
from runners.validation import validate_config
from tests.conftest import ROOT

CONF = ROOT / "conf"
HYDRA_OWN = CONF / "hydra"  # Hydra's settings, typed by Hydra and its plugins, not by ours
PACKAGE = re.compile(r"^#\s*@package\s+(\S+)")
REQUIRED = "???"  # a value only the user can give: a marker, not a default
# what an option needs beside it to compose: a value only the user gives, or the option
# whose defaults list holds the group
NEEDS = {"dataset=folder": ["dataset.root=data/sample"],
         "system=routed": ["system.cascade=[naive,arag]"],
         "dataset/reference_model": ["dataset=financebench_qfs"]}


def config_files() -> list[Path]:
    return sorted(p for p in CONF.rglob("*.yaml") if HYDRA_OWN not in p.parents)


def package(path: Path) -> str:
    """Where the file's keys land: its ``# @package`` header, else its group's path."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if match := PACKAGE.match(line):
            return "" if match[1] == "_global_" else match[1]
    group = path.parent.relative_to(CONF)
    return "" if group == Path(".") else ".".join(group.parts)


def schema_of(hint: Any) -> type | None:
    """The dataclass a field holds (also when it may be null), or None for a plain value."""
    union = get_origin(hint) in (Union, types.UnionType)
    return next((t for t in (get_args(hint) if union else (hint,)) if is_dataclass(t)), None)


def schema_at(dotted: str) -> type:
    schema: type = RunConfig
    for key in filter(None, dotted.split(".")):
        nested = schema_of(get_type_hints(schema)[key])
        assert nested is not None, f"{dotted}: {key} holds no schema"
        schema = nested
    return schema


def same(value: Any, default: Any) -> bool:
    return value != REQUIRED and isinstance(value, bool) == isinstance(default, bool) \
        and value == default


def repeated_defaults(values: dict[str, Any], schema: type, where: str) -> Iterator[str]:
    """The keys of ``values`` that set what ``schema`` declares as their default."""
    hints = get_type_hints(schema)
    defaults = OmegaConf.to_container(OmegaConf.structured(schema), enum_to_str=True)
    assert isinstance(defaults, dict)
    for key, value in values.items():
        if key not in hints:  # not the schema's: ``defaults``, Hydra's own ``hydra``
            continue
        nested = schema_of(hints[key])
        if nested is not None and isinstance(value, dict):
            yield from repeated_defaults(value, nested, f"{where}{key}.")
        elif same(value, defaults[key]):
            yield (f"{where}{key}: {value!r} is the default {schema.__name__}.{key} declares; "
                   "remove the key (the dataclass holds the default)")


@pytest.mark.parametrize("path", config_files(), ids=lambda p: str(p.relative_to(CONF)))
def test_no_config_file_repeats_a_default(path):
    values = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    assert isinstance(values, dict)
    where = package(path)
    found = list(repeated_defaults(values, schema_at(where), f"{where}." if where else ""))
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found)


def group_options() -> list[str]:
    groups = sorted({p.parent for p in CONF.rglob("*.yaml")} - {CONF})
    return [f"{group.relative_to(CONF)}={option.stem}" for group in groups
            for option in sorted(group.glob("*.yaml"))]


@pytest.mark.parametrize("option", group_options())
def test_every_option_of_every_group_composes(make_cfg, option):
    needs = NEEDS.get(option, NEEDS.get(option.split("=")[0], []))
    validate_config(make_cfg(option, *needs))
