"""Importing this module registers every built-in dataset adapter."""

from arag.datasets import ectsum, financebench, sample  # noqa: F401
