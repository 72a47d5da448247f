"""Compaction: the log cleaner (keep the last value per key; Kafka's design, "Log
compaction") and the changelog side (rebuilding state from a compacted topic).

Depends on ``tierlog.local`` and ``tierlog.records`` only (DESIGN.md's layering); the broker
wires the cleaner to its logs.
"""
