"""Answers a dataset gives with each task (``dataset=summedits``: the summaries people
labelled), as a system: no model is called, the answer is ``Task.meta["given_answer"]``, and
faithfulness is judged against the task's whole documents. Scoring such a run measures the
scorers, not a system."""

from __future__ import annotations

from arag.calls import CallLog
from arag.config import ConfigError
from arag.records import Prediction, Task
from arag.systems.base import RunSetup, Sources, System, register_system
from arag.systems.builtin import whole_documents

GIVEN = "given_answer"


@register_system("given")
class GivenAnswers(System):
    """The dataset's own answers; what a scorer says of them is compared with people."""

    searches = False

    @classmethod
    def configure(cls, setup: RunSetup) -> type[System]:
        lacking = [t.id for t in setup.tasks if not isinstance(t.meta.get(GIVEN), str)]
        if lacking:
            raise ConfigError(f"system=given reads each task's given answer, and task "
                              f"{lacking[0]!r} has none ({len(lacking)} of {len(setup.tasks)} "
                              "lack one). Fix: use a dataset that gives its answers "
                              "(dataset=summedits), or another system (system=arag)")
        return cls

    @classmethod
    def judged_sources(cls, pred: Prediction, task: Task, sources: Sources
                       ) -> list[tuple[str, str]]:
        return whole_documents(pred, sources)

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int | None:
        return None

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        pred.predicted = str(task.meta[GIVEN])
        pred.model = "given"
        pred.loops = 0
