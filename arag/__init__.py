"""arag: what is evaluated. Models, retrieval, tools, the A-RAG agent, systems, datasets.

Never imports ``runners`` or ``mlflow``.
"""

from arag.records import Chunk, Corpus, Document, Prediction, Task

__all__ = ["Chunk", "Corpus", "Document", "Prediction", "Task"]
