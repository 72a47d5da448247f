"""DescribeLogDirs (API 35): which partitions live in which of this broker's log dirs, and
their sizes. Kafka's reassignment tool asks for it before it moves anything."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.metadata import request_response_type
from tierlog.protocol import Request
from tierlog.protocol.kio_build import build

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices


async def handle_describe_log_dirs(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    refused = services.authz.request_error(request)  # Describe on the cluster
    if refused:
        # v3+ carries the code; older versions answer no dirs (Kafka).
        return build(
            request_response_type(request),
            {"throttle_time": 0, "error_code": refused, "results": []},
        )
    replicas = services.replicas
    log_manager = replicas.log_manager
    wanted: set[tuple[str, int]] | None = None
    if body.topics is not None:  # null: every partition
        wanted = {(t.topic, p) for t in body.topics for p in t.partitions}
    results = []
    for log_dir in log_manager.log_dirs:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), partition in sorted(replicas.partitions.items()):
            if wanted is not None and (topic, index) not in wanted:
                continue
            if log_manager.log_dir_of(topic, index) != log_dir:
                continue
            topics.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "partition_size": partition.local.size,
                    # Kafka reports a lag only for a "future" replica being moved between
                    # log dirs (AlterReplicaLogDirs), which tierlog does not do.
                    "offset_lag": 0,
                    "is_future_key": False,
                }
            )
        stats = os.statvfs(log_dir)
        results.append(
            {
                "error_code": 0,
                "log_dir": str(log_dir),
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                "total_bytes": stats.f_blocks * stats.f_frsize,
                "usable_bytes": stats.f_bavail * stats.f_frsize,
            }
        )
    return build(
        request_response_type(request), {"throttle_time": 0, "error_code": 0, "results": results}
    )
