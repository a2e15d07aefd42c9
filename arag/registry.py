"""One registry helper for everything the config picks by name: systems, providers,
dataset adapters and scorers.

A registry knows the package its entries live in and imports every module of that package
on the first lookup, so a new entry is one file there (plus its YAML), with no list to
edit and no import cycle to break by hand. An unknown name fails with the config key to
fix and the names that exist.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(ValueError):
    """A config names an entry that is not registered; the message lists the known ones."""


class Registry(Generic[T]):
    def __init__(self, kind: str, config_key: str, package: str):
        self.kind = kind
        self.config_key = config_key
        self.package = package
        self._entries: dict[str, T] = {}
        self._ready = False
        self._loading = False
        self._lock = threading.RLock()  # re-entrant: a module being imported may look itself up

    def register(self, name: str) -> Callable[[T], T]:
        def decorate(entry: T) -> T:
            self._entries[name] = entry
            return entry

        return decorate

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(f"{self.config_key}={name!r} is not a known {self.kind}; choose "
                              f"one of: {', '.join(self.names())}") from None

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
        """Import every module of the package once: importing one registers its entries."""
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
            finally:
                self._loading = False
            self._ready = True
