"""Send per-partition requests to partition leaders, with refresh-and-retry.

ListOffsets, DeleteRecords (and later OffsetForLeaderEpoch) go to each partition's leader.
:func:`for_each_leader` groups partitions by leader, sends one request per broker
concurrently, retries the partitions whose error is retriable after refreshing metadata, and
returns per-partition results; non-retriable errors are returned for the caller to decide.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from moldau.protocol.errors import ErrorCode

from .cluster import Cluster
from .errors import BrokerError, KafkaTimeoutError
from .retry import backoff_ms
from .types import TopicPartition

V = TypeVar("V")

# (node_id, {tp: input}) -> {tp: result or BrokerError}
LeaderCall = Callable[
    [int, dict[TopicPartition, Any]], Awaitable[dict[TopicPartition, Any]]
]


async def for_each_leader(
    cluster: Cluster,
    items: Mapping[TopicPartition, Any],
    call: LeaderCall,
    *,
    timeout_ms: int,
    what: str,
) -> dict[TopicPartition, Any]:
    """Run ``call`` per leader until every item has a result or a non-retriable error."""
    remaining = dict(items)
    results: dict[TopicPartition, Any] = {}
    deadline = time.monotonic() + timeout_ms / 1000
    attempt = 0
    last_error: BaseException | None = None
    cluster.add_topics({tp.topic for tp in remaining})
    if any(cluster.leader_for(tp) < 0 for tp in remaining):
        await cluster.refresh()
    while remaining:
        by_leader: dict[int, dict[TopicPartition, Any]] = {}
        for tp, value in remaining.items():
            leader = cluster.leader_for(tp)
            if leader < 0:
                if tp.topic in cluster.topics and tp.partition not in cluster.topics[
                    tp.topic
                ].partitions:
                    results[tp] = BrokerError(ErrorCode.unknown_topic_or_partition,
                                              context=f"{what} {tp}")
                    continue
                last_error = BrokerError(ErrorCode.leader_not_available,
                                         context=f"{what} {tp}")
                continue
            by_leader.setdefault(leader, {})[tp] = value
        for tp in results:
            remaining.pop(tp, None)
        answers = await asyncio.gather(
            *(call(node, batch) for node, batch in by_leader.items()), return_exceptions=True
        )
        for (node, batch), answer in zip(by_leader.items(), answers, strict=True):
            if isinstance(answer, BaseException):
                if not getattr(answer, "retriable", False):
                    raise answer
                last_error = answer
                continue
            for tp, result in answer.items():
                if isinstance(result, BrokerError) and result.retriable:
                    last_error = result
                    continue
                results[tp] = result
                remaining.pop(tp, None)
            del node, batch
        if not remaining:
            break
        pause = backoff_ms(attempt, cluster.config["retry.backoff.ms"],
                           cluster.config["retry.backoff.max.ms"]) / 1000
        if time.monotonic() + pause > deadline:
            raise KafkaTimeoutError(
                f"{what} for {', '.join(map(str, sorted(remaining)))} did not complete in "
                f"{timeout_ms} ms; last error: {last_error}"
            ) from last_error
        await asyncio.sleep(pause)
        try:
            await cluster.refresh()
        except Exception as exc:
            if not getattr(exc, "retriable", False):
                raise
        attempt += 1
    return results


async def list_offsets(
    cluster: Cluster,
    specs: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    timeout_ms: int = 60000,
) -> dict[TopicPartition, tuple[int, int, int] | BrokerError]:
    """ListOffsets: ``{tp: (offset, timestamp, leader_epoch)}`` or a BrokerError per tp.

    ``specs`` values: -2 earliest, -1 latest, -3 max timestamp (needs v7), or a timestamp.
    """

    async def call(node: int, batch: dict[TopicPartition, int]) -> dict[TopicPartition, Any]:
        conn = await cluster.connection(node)
        min_version = 7 if any(v == -3 for v in batch.values()) else 1
        version = conn.versions.require(2, min_version, what="ListOffsets")
        topics: dict[str, list[dict[str, int]]] = {}
        for tp, ts in batch.items():
            info = cluster.partition_info(tp)
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition,
                "current_leader_epoch": info.leader_epoch if info else -1,
                "timestamp": ts,
                "max_num_offsets": 1,
            })
        response = await conn.request(2, {
            "replica_id": -1,
            "isolation_level": isolation_level,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
            "timeout": timeout_ms,
        }, version=version)
        out: dict[TopicPartition, Any] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    out[tp] = BrokerError(p.error_code, context=f"ListOffsets {tp}")
                else:
                    out[tp] = (p.offset, p.timestamp, getattr(p, "leader_epoch", -1))
        return out

    return await for_each_leader(cluster, specs, call, timeout_ms=timeout_ms, what="ListOffsets")
