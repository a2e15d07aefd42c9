"""arag: what is evaluated. Models, retrieval, tools, the A-RAG agent, systems, datasets.

Never imports ``runners`` or ``mlflow``.
"""

from arag.citations import Claim, claims, strip_citations
from arag.records import Chunk, Corpus, Document, Prediction, Task

__all__ = ["Chunk", "Claim", "Corpus", "Document", "Prediction", "Task", "claims",
           "strip_citations"]
