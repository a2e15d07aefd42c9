"""Answers of a judged sweep for people to label (``python -m report label-sample``): the
sample drawn (``sample``), what each answer was judged against (``sources``) and the page
people label on (``page``). People's labels are read back by ``tracking.human_labels``."""

from labelling.page import labelled_name, page, page_answers, rubrics
from labelling.sample import main, ppi_sample, stratified_sample, template_lines
from labelling.sources import Read

__all__ = ["Read", "labelled_name", "main", "page", "page_answers", "ppi_sample", "rubrics",
           "stratified_sample", "template_lines"]
