"""What a dataset holds, as digests: one for the whole dataset, one per task.

The digest hashes what the adapter produced, not the files it came from: every document
(id, sentences, metadata, pages) and every task (question, documents, reference, gold,
type, style options, metadata), after ``dataset.limit``. So an option that changes what is
read (a split, ``max_sentence_words``, a PDF parsed anew) changes the digest through its
effect, an option that does not (where PDFs are cached) leaves it alone, the same files at
another ``dataset.root`` keep it, and an adapter from a user's own package gets it without
doing anything. It costs no file read: the content is already loaded.

A task's digest covers the task and the documents it reads, so on resume a task whose
question, reference or documents changed is answered again while the others are kept.
"""

from __future__ import annotations

from arag.records import Corpus, Document, Task, content_hash

DIGEST_LENGTH = 16


def document_digest(doc: Document) -> str:
    # the fields as they are (vars, not dataclasses.asdict: no deep copy of every line)
    return content_hash("document", vars(doc), length=DIGEST_LENGTH)


def digests(tasks: list[Task], corpus: Corpus) -> tuple[str, dict[str, str]]:
    """(the dataset's digest, task id -> the digest of the task and of every document it
    reads). The dataset's covers every task in order and every document, read by a task or
    not (a document nobody asks about still changes what corpus-wide search finds)."""
    docs = {doc_id: document_digest(doc) for doc_id, doc in corpus.documents.items()}
    per_task = {task.id: content_hash("task", vars(task), [docs.get(d) for d in task.doc_ids],
                                      length=DIGEST_LENGTH)
                for task in tasks}
    whole = content_hash("dataset", list(per_task.items()), sorted(docs.values()),
                         length=DIGEST_LENGTH)
    return whole, per_task
