"""Notebook pipelines: run a notebook with papermill (``runner``), parse cron expressions
(``cron``, no I/O) and run scheduled notebooks from ``pipelines.toml`` (``schedule``)."""
