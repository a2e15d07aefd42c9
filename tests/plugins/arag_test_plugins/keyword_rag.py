"""A system added the way a user adds one, from their own package: this module (entry point
``keyword_rag`` in group ``arag_eval.systems``) and conf/system/keyword_rag.yaml.

Top-k keyword search (exact matches of the question's words), one call. Importing the
module registers it; nothing else in the harness names it.
"""

from __future__ import annotations

from arag.calls import CallLog
from arag.records import Prediction, Task
from arag.systems import System, register_system
from arag.trace import Retrieval


@register_system("keyword_rag")
class KeywordRAG(System):
    retrieves = True
    ranks = True

    @classmethod
    def ranking(cls, pred: Prediction) -> list[str] | None:
        return next((s.result_chunk_ids for s in pred.trace if isinstance(s, Retrieval)), None)

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        index = self.ctx.index()
        words = [w.strip("?.,'s").lower() for w in task.question.split() if len(w) > 3]
        hits = calls.retrieve("keyword_search", {"keywords": words, "top_k": 10},
                              lambda: index.keyword_search(words, 10, self.ctx.scope_doc_ids(task)))
        ids = [h.chunk_id for h in hits][: self.ctx.top_k]
        context = "\n\n".join(f'<chunk id="{c}">\n{index.by_id[c].text}\n</chunk>' for c in ids)
        pred.retrieved_chunk_ids = pred.context_chunk_ids = ids
        self.one_call(task, calls, pred, context)
