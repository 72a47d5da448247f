"""Topic ids as Kafka's tools print them: the 16 bytes in URL-safe base64 without padding
(Java's ``Uuid.toString()``, ``Base64.getUrlEncoder().withoutPadding()``), 22 characters.

Every tierlog tool prints ids this way, whatever form it got them in: confluent-kafka's
``Uuid`` prints standard base64 (``+`` and ``/``), a remote manifest stores a UUID string.
Stored formats are left alone; only what a person reads is unified.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any


def kafka_id(value: uuid.UUID | Any) -> str:
    """``value`` (a :class:`uuid.UUID`, or anything with confluent-kafka ``Uuid``'s
    ``get_most_significant_bits``/``get_least_significant_bits``) in Kafka's form."""
    if isinstance(value, uuid.UUID):
        raw = value.bytes
    else:
        # The bits come back as signed 64-bit Java longs.
        high = value.get_most_significant_bits() & (2**64 - 1)
        low = value.get_least_significant_bits() & (2**64 - 1)
        raw = high.to_bytes(8, "big") + low.to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
