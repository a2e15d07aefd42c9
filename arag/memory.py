"""Python's cyclic garbage collector, told what lives as long as the process.

A sweep holds millions of objects that never become garbage: the modules of MLflow, torch
and transformers, a loaded model, a dataset. CPython's collector walks all of them in each
full collection, and with its default thresholds (a young collection every 700 allocations)
it ran 14 full ones in a 747-task scoring sweep: 2.9 s of its 26 s (bench/README.md).
``settle`` moves what is alive now out of the collector's sight (``gc.freeze``: such
objects are still freed when their last reference goes, only never walked in search of
cycles) and spaces the young collections out to every 10,000 allocations, as servers that
hold large heaps do. It is called once the imports are done, as a sweep or a process's
first job starts (``settle_imports``), and after a model is loaded; a cycle of garbage
alive at that moment is kept, so it is not called between jobs. While the entry point
imports its modules the collector is paused (``pause_for_imports``): what they make lives
on, and 120 young collections walked it again and again (0.4 s of a sweep's start).

``kept_by_characters``: a cache of a function of one text, bounded by the characters of
the texts it holds, not by their count, for what a run reads in order (its documents) with
short texts (references, claims, answers) read in between: these weigh little and do not
push a document out, and a few large ones cannot fill the memory.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable
from typing import TypeVar

from cachetools import LRUCache, cached

T = TypeVar("T")

YOUNG = 10_000  # allocations between young collections (CPython's default: 700)


def settle() -> None:
    """What is alive now lives as long as the process: the collector no longer walks it."""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if 0 < young < YOUNG:  # 0: the collector is off, and stays so
        gc.set_threshold(YOUNG, middle, old)


_imports_settled = False
_paused = False


def pause_for_imports() -> None:
    """No collection while the entry point imports its modules; ``settle_imports`` resumes
    it. A collector already off stays off."""
    global _paused
    if gc.isenabled() and not _imports_settled:
        gc.disable()
        _paused = True


def settle_imports() -> None:
    """``settle`` once the imports and Hydra's composing are done (a sweep's start, or a
    process's first job), and the collector paused for the imports resumed; later calls
    leave it as it is."""
    global _imports_settled, _paused
    if not _imports_settled:
        _imports_settled = True
        settle()
        if _paused:
            _paused = False
            gc.enable()


def kept_by_characters(chars: int) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """Keep ``fn(text)`` least recently used first while the texts kept total at most
    ``chars`` characters (a text over the bound is not kept); ``.cache`` is the cache."""
    def keep(fn: Callable[[str], T]) -> Callable[[str], T]:
        cache: LRUCache = LRUCache(chars, getsizeof=lambda held: held[1])
        weighed = cached(cache, lock=threading.Lock())(lambda text: (fn(text), max(1, len(text))))

        @functools.wraps(fn)
        def kept(text: str) -> T:
            return weighed(text)[0]

        kept.cache = cache  # type: ignore[attr-defined]
        return kept
    return keep
