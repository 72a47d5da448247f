"""Notebook jobs: run a notebook from the top-level ``notebooks/`` with papermill
(``runner``), read back the summary it records (``summary``), parse cron expressions
(``cron``, no I/O) and run scheduled notebooks from ``pipelines.toml`` (``schedule``)."""
