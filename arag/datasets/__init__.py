"""Dataset adapters -> validated Corpus + Tasks."""

from arag.datasets.base import (
    ADAPTERS,
    Dataset,
    DatasetError,
    forget_loaded,
    load_dataset,
    read_jsonl,
    register_adapter,
    validate,
)

__all__ = ["ADAPTERS", "Dataset", "DatasetError", "forget_loaded", "load_dataset", "read_jsonl",
           "register_adapter", "validate"]
