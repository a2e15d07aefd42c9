"""``python -m report <parent run id>``: rebuild a sweep's report (see ``report.report``);
``python -m report compare <baseline> <candidate>``: hold a sweep against a baseline
(see ``report.baseline_report``; exit 3 on a regression)."""

import logging
import sys

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    if sys.argv[1:2] == ["compare"]:
        from report.baseline_report import main as compare

        sys.exit(compare(sys.argv[2:]))
    from report.report import main

    main()
