"""DescribeLogDirs (API 35) and AlterReplicaLogDirs (API 34): which partitions live in which
of this broker's log dirs, and moving them between those dirs (KIP-113). Kafka's
reassignment tool asks for the first before it moves anything, and sends the second for
the ``log_dirs`` of its plan; ``kafka-log-dirs --describe`` shows the first.

A partition being moved appears twice: where it is, and in its destination as the future
replica (``is_future_key``) with its offset lag, the records the copy does not have yet
(``tierlog.broker.replication.log_dir_mover``). A current replica's offset lag is how far its
log end is below the high watermark (a follower catching up), as in Kafka.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.metadata import request_response_type
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
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
    mover = services.log_dir_mover
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
            local = partition.local
            topics.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "partition_size": local.size,
                    "offset_lag": max(0, partition.high_watermark - local.log_end_offset),
                    "is_future_key": False,
                }
            )
        for topic, index, size, lag in mover.future_replicas(log_dir) if mover else ():
            if wanted is not None and (topic, index) not in wanted:
                continue
            topics.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "partition_size": size,
                    "offset_lag": lag,
                    "is_future_key": True,
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
                # v5 (KIP-1066): tierlog cordons no log dir.
                "is_cordoned": False,
            }
        )
    return build(
        request_response_type(request), {"throttle_time": 0, "error_code": 0, "results": results}
    )


async def handle_alter_replica_log_dirs(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    mover = services.log_dir_mover
    refused = services.authz.request_error(request)  # Alter on the cluster, per partition
    answers: dict[str, list[dict[str, Any]]] = {}
    for entry in body.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                if refused:
                    code = refused
                elif mover is None:
                    code = ErrorCode.kafka_storage_error
                else:
                    code = mover.alter(topic.name, index, entry.path)
                answers.setdefault(topic.name, []).append(
                    {"partition_index": index, "error_code": code}
                )
    results = [{"topic_name": name, "partitions": parts} for name, parts in answers.items()]
    return build(request_response_type(request), {"throttle_time": 0, "results": results})
