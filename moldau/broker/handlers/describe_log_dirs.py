"""DescribeLogDirs (key 35), versions 1-4 (v0 was removed in Kafka 4.0, KIP-896; kio has no
schema for it).

Each broker answers for its own ``log.dirs``, as Kafka's ``ReplicaManager.describeLogDirs``:
one result per log dir with its absolute path, an error code (KAFKA_STORAGE_ERROR while writes
to it are failing, else NONE), and per hosted partition of the asked topics (all topics when
``topics`` is null) the size of its log in bytes, the offset lag (0: no log is being moved
between dirs, so there is no future replica behind the current one) and ``is_future_key``
false. v4 adds the file system's total and usable bytes (KIP-827), from ``statvfs``; -1 when
they cannot be read. A partition the request names that this broker does not host is left out,
as Kafka does.

Left out: ACL checks (Kafka requires DESCRIBE on the cluster) and future replicas
(AlterReplicaLogDirs is not served).
"""

from __future__ import annotations

import shutil
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...storage.health import DISK_HEALTH
from ..dispatch import RequestContext, handler


def _wanted(request: Any) -> dict[str, set[int]] | None:
    """Topic -> asked partitions, or None for every partition of every topic."""
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = {}
    for topic in request.topics:
        wanted.setdefault(topic.topic, set()).update(int(p) for p in topic.partitions)
    return wanted


def _disk(log_dir: str) -> tuple[int, int]:
    try:
        usage = shutil.disk_usage(log_dir)
    except OSError:
        return -1, -1
    return usage.total, usage.free


@handler(ApiKey.DESCRIBE_LOG_DIRS, 1, 4)
def handle_describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.replica_manager.log_manager
    wanted = _wanted(request)
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {d: {} for d in manager.log_dirs}
    for log in sorted(manager.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
        if wanted is not None and log.partition not in wanted.get(log.topic, ()):
            continue
        log_dir = manager.log_dir_of(log.topic, log.partition)
        if log_dir not in by_dir:
            continue
        size = log.size_in_bytes
        by_dir[log_dir].setdefault(log.topic, []).append({
            "partition_index": log.partition, "partition_size": size, "offset_lag": 0,
            "is_future_key": False})
    results = []
    for log_dir, topics in by_dir.items():
        failing = log_dir in DISK_HEALTH.failing
        total, usable = _disk(log_dir)
        results.append({
            "error_code": ErrorCode.kafka_storage_error if failing else ErrorCode.none,
            "log_dir": log_dir,
            "topics": [{"name": name, "partitions": parts}
                       for name, parts in sorted(topics.items())],
            "total_bytes": total, "usable_bytes": usable})
    return ctx.respond({"throttle_time": 0, "error_code": ErrorCode.none, "results": results})
