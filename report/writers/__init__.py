"""The report's writers: they turn claims and notes (``report.model``) into words."""
