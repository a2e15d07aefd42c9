"""The collector told what lives as long as the process (``arag.memory``): what is alive
when it settles is no longer walked, garbage made later is still collected, and a
collector the user turned off stays off."""

from __future__ import annotations

import gc
import weakref

import pytest

from arag import memory


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture
def collector():
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)


def test_what_is_alive_when_settled_is_not_walked_and_later_garbage_is_still_freed(collector):
    kept = [Node() for _ in range(100)]
    before = gc.get_freeze_count()
    memory.settle()
    assert gc.get_freeze_count() >= before + 100  # the objects alive now, out of its sight
    assert gc.get_threshold()[0] == memory.YOUNG
    later = Node()
    gone = weakref.ref(later)
    del later
    gc.collect()
    assert gone() is None  # a cycle made after settling is collected as before
    assert all(k.me is k for k in kept)


def test_a_collector_turned_off_stays_off(collector):
    gc.set_threshold(0)
    memory.settle()
    assert gc.get_threshold()[0] == 0


def test_a_larger_threshold_the_user_set_is_kept(collector):
    gc.set_threshold(50_000, 20, 20)
    memory.settle()
    assert gc.get_threshold() == (50_000, 20, 20)


def test_a_cache_kept_by_characters_weighs_each_text_by_its_length():
    """Short texts read between two documents leave them kept; past the bound the least
    recently used goes first; a text over the bound is computed, never kept."""
    calls = []

    @memory.kept_by_characters(100)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    first, second = "a" * 40, "b" * 40
    for text in (first, "x", "y", second, "z", first, second):
        assert length(text) == len(text)
    assert calls == [first, "x", "y", second, "z"]  # both documents kept through the rest
    third = "c" * 40  # 40 + 40 + 40 > 100: the least recently used (first) goes
    length(third)
    length(second)
    length(first)
    assert calls[-2:] == [third, first]
    assert length.cache.currsize <= 100
    assert length("d" * 101) == 101 and length("d" * 101) == 101
    assert calls[-2:] == ["d" * 101, "d" * 101]  # over the bound: not kept
