"""``python -m report <parent run id>``: rebuild a sweep's report (see ``report.report``)."""

import logging

from report.report import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
