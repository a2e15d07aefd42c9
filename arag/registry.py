"""One registry helper for everything the config picks by name: systems, providers,
dataset adapters and scorers.

A registry knows the package its entries live in and imports every module of that package
on the first lookup, so a new entry is one file there (plus its YAML), with no list to
edit and no import cycle to break by hand. Entries from outside this repository come from
the user's installed packages through a Python entry-point group per registry
(``arag_eval.systems``, ``arag_eval.scorers``, ``arag_eval.providers``,
``arag_eval.datasets``), loaded on the same first lookup: an entry point names a module
(importing it registers its entries with the usual decorator) or an object (registered
under the entry point's name). A name registered twice by two different origins is
refused, naming both; an unknown name fails with the config key to fix and the names that
exist.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

from arag.config import ConfigError

T = TypeVar("T")


class UnknownName(ConfigError):
    """A config names an entry that is not registered; the message lists the known ones.
    A ConfigError, so the entry points report it as one line, like any wrong setting."""


class DuplicateName(ValueError):
    """Two different origins register the same name; the message names both."""


class PluginError(ValueError):
    """An installed package's entry point cannot be loaded; the message names it."""


def origin_of(entry: Any) -> str:
    """``module.qualname`` of what was registered (a class or function)."""
    module = getattr(entry, "__module__", None) or type(entry).__module__
    qualname = getattr(entry, "__qualname__", None) or type(entry).__qualname__
    return f"{module}.{qualname}"


class Registry(Generic[T]):
    def __init__(self, kind: str, config_key: str, package: str, group: str | None = None,
                 on_register: Callable[[str, T], None] | None = None):
        self.kind = kind
        self.config_key = config_key
        self.package = package
        self.group = group  # the entry-point group installed packages register in
        self._on_register = on_register
        self._entries: dict[str, T] = {}
        self._origins: dict[str, tuple[str, str]] = {}  # name -> (identity, as shown)
        self._entry_point: EntryPoint | None = None  # the one being loaded, for origins
        self._ready = False
        self._loading = False
        self._lock = threading.RLock()  # re-entrant: a module being imported may look itself up

    def register(self, name: str, origin: str | None = None) -> Callable[[T], T]:
        def decorate(entry: T) -> T:
            self._add(name, entry, origin or origin_of(entry))
            return entry

        return decorate

    def _add(self, name: str, entry: T, origin: str) -> None:
        with self._lock:
            shown = origin
            if self._entry_point is not None:
                ep = self._entry_point
                dist = ep.dist.name if ep.dist is not None else "an installed package"
                shown += f" (entry point {ep.name!r} in group {ep.group!r} of {dist})"
            known = self._origins.get(name)
            if known is not None and known[0] != origin:  # the same origin re-imported is fine
                raise DuplicateName(
                    f"{self.kind} {name!r} is registered twice: by {known[1]} and by {shown}. "
                    f"Rename one of them ({self.config_key} picks by name)")
            if self._on_register is not None:
                self._on_register(name, entry)
            self._entries[name] = entry
            self._origins[name] = (origin, shown)

    def origin(self, name: str) -> str:
        """Where ``name`` was registered (module.qualname, and the entry point if any)."""
        self._load()
        return self._origins[name][1]

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            names = self.names()
            raise UnknownName(f"{self.config_key}={name!r} is not a known {self.kind}. Fix: "
                              f"{self.config_key}=<one of {', '.join(names)}>") from None

    __getitem__ = get

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        self._load()
        return sorted(self._entries.items())

    def has(self, name: str) -> bool:
        self._load()
        return name in self._entries

    __contains__ = has

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _load(self) -> None:
        """Import every module of the package once (importing one registers its entries),
        then every entry point of the registry's group."""
        if self._ready:
            return
        with self._lock:
            if self._ready or self._loading:
                return
            self._loading = True
            try:
                package = importlib.import_module(self.package)
                for module in pkgutil.iter_modules(package.__path__):
                    importlib.import_module(f"{self.package}.{module.name}")
                for ep in entry_points(group=self.group) if self.group else ():
                    self._load_entry_point(ep)
            finally:
                self._loading = False
                self._entry_point = None
            self._ready = True

    def _load_entry_point(self, ep: EntryPoint) -> None:
        self._entry_point = ep
        try:
            loaded = ep.load()
        except Exception as exc:
            dist = ep.dist.name if ep.dist is not None else "an installed package"
            raise PluginError(f"entry point {ep.name} = {ep.value!r} (group {ep.group!r}, "
                              f"from {dist}) cannot be loaded: {type(exc).__name__}: {exc}. "
                              f"Fix the package or uninstall it") from exc
        if not isinstance(loaded, ModuleType) and self._entries.get(ep.name) is not loaded:
            self._add(ep.name, loaded, origin_of(loaded))  # an object: registered by its name
