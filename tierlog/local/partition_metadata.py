"""``partition.metadata``: the topic id a partition directory belongs to (Kafka's file).

Byte format (Kafka's ``PartitionMetadataFile``, version 0), text, two lines::

    version: 0
    topic_id: <the topic id, 22 characters of URL-safe base64 without padding>

Why it is kept: a directory is named after its topic's *name* (``orders-3``), and a name
can be deleted and created again. A directory that outlived its topic's deletion (a crash
between the deletion's record and the directory's removal, a broker that was down while
the topic went) would otherwise be adopted by the next topic of that name and serve the
deleted records (issue 20, item 5). With the id beside the data, a directory whose id is
not the one the metadata holds for its name is a stray, never served
(``LogManager.set_aside``).

The file is written when a log is created for a topic, before any record is appended;
directories from before this file existed have none and are adopted by the topic of their
name (Kafka does the same on upgrade).

It is written like the records are (DESIGN.md principle 3: the page cache is the cache,
flushed by policy), not fsynced: fsyncing it doubled the cost of hosting a partition (two
more fsyncs, ~6 ms each on the test box), and a 10,000-partition topic pays that 10,000
times. Only a power loss within the kernel's writeback delay of the creation can lose it
(a kill -9 cannot: the page cache survives the process), and the loss then matters only if
the topic is also deleted and created again while the broker is down; the records
appended in that window are no safer. Kafka writes it the same way (flushed in the
background, ``PartitionMetadataFile.maybeFlush``).
"""

from __future__ import annotations

import base64
import logging
import os
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "partition.metadata"
VERSION = 0


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    """The inverse of ``encode_topic_id``.

    Raises:
        ValueError: not 22 characters of URL-safe base64 naming 16 bytes.
    """
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def write(directory: Path, topic_id: uuid.UUID) -> None:
    """Write the file whole under a temporary name, then rename it in place, so a reader
    never sees half of it; no fsync (see the module's docstring)."""
    data = f"version: {VERSION}\ntopic_id: {encode_topic_id(topic_id)}\n".encode()
    tmp = directory / (FILE_NAME + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, directory / FILE_NAME)


def read(directory: Path) -> uuid.UUID | None:
    """The topic id the directory belongs to; None when it has no such file, or one that
    cannot be read (logged: the directory is then treated as one from before the file
    existed)."""
    path = directory / FILE_NAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("%s: unreadable (%s); the directory's topic id is unknown", path, exc)
        return None
    fields = dict(
        (key.strip(), value.strip())
        for key, sep, value in (line.partition(":") for line in text.splitlines())
        if sep
    )
    try:
        if fields.get("version") != str(VERSION):
            raise ValueError(f"version {fields.get('version')!r}")
        return decode_topic_id(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        log.warning("%s: unreadable (%s); the directory's topic id is unknown", path, exc)
        return None
