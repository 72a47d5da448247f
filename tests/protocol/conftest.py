"""Shared set-up for the protocol tests."""

from __future__ import annotations

import warnings

# kafka-python loads its JSON schemas with a deprecated importlib API at import time; the
# warnings say nothing about tierlog.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.producer  # noqa: F401
