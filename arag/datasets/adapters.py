"""Importing this module registers every built-in dataset adapter."""

from arag.datasets import ectsum, financebench, financebench_qfs, sample  # noqa: F401
