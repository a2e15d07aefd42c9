"""Importing this module registers every built-in dataset adapter."""

from arag.datasets import sample  # noqa: F401
