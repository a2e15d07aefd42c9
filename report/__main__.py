"""``python -m report <parent run id>``: rebuild a sweep's report (see ``report.report``);
``python -m report compare <baseline> <candidate>``: hold a sweep against a baseline
(see ``report.baseline_report``; exit 3 on a regression);
``python -m report label-sample <sweep>``: answers for people to label (see
``labelling.sample``)."""

import logging
import sys

from tracking.logs import quiet


def setup_console() -> None:
    """Our INFO lines on stderr; the libraries' INFO (faiss's loader, MLflow) and MLflow's
    per-artifact download bars stay out of the output (tracking.logs.quiet)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet()


if __name__ == "__main__":
    setup_console()
    if sys.argv[1:2] == ["compare"]:
        from report.baseline_report import main as compare

        sys.exit(compare(sys.argv[2:]))
    if sys.argv[1:2] == ["label-sample"]:
        from labelling.sample import main as label_sample

        sys.exit(label_sample(sys.argv[2:]))
    from report.cli import main

    main()
