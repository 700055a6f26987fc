"""``/admin/reassign_partitions``: reassignments asked the pre-2.4 way (old
kafka-reassign-partitions.sh ``--zookeeper``, or a script writing the znode), as Kafka's
ZooKeeper-mode controller still takes them.

While a broker is the active controller it watches the znode. When one appears, its
partitions' target replicas go through the controller as AlterPartitionReassignments would
(:meth:`~moldau.broker.metadata.controller.Controller.alter_partition_reassignments`: the same
checks, the same state machine); refusals are logged naming the partition. Once none of the
accepted partitions is being reassigned any more, the controller deletes the znode, which is
how old tools learn it is done. A znode that is not Kafka's format is logged and deleted, as
Kafka's controller deletes it. A controller elected while the znode exists takes it up again
(partitions already moved are left alone).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kazoo.exceptions import KazooException, NoNodeError

from ..metadata.controller import Controller
from ..metadata.reassignment import ReassignmentRequest
from . import layout
from .admin_layout import PartitionReassignment
from .aio import AsyncZooKeeper
from .layout import ZNodeFormatError

log = logging.getLogger(__name__)

#: How often the controller looks whether the znode's reassignments are done.
DONE_POLL_S = 0.5
RETRY_S = 1.0


async def watch_legacy_reassignments(zk: AsyncZooKeeper, controller: Controller,
                                     current: Callable[[], bool]) -> None:
    """Carry out ``/admin/reassign_partitions`` while ``current()`` (this broker is still the
    controller of the epoch that started the watch)."""
    path = layout.REASSIGN_PARTITIONS
    while current():
        try:
            stat, fired = await zk.exists_watched(path)
            if stat is None:
                await fired
                continue
            data, _stat = await zk.get(path)
        except NoNodeError:
            continue
        except KazooException as exc:  # ZooKeeper trouble: retry later
            log.info("reading %s failed: %r", path, exc)
            await asyncio.sleep(RETRY_S)
            continue
        try:
            plan = PartitionReassignment.from_json(data)
        except ZNodeFormatError as exc:
            log.warning("deleting %s, which is not a reassignment in Kafka's format: %s",
                        path, exc)
            await _delete(zk, path)
            continue
        await _carry_out(controller, plan, current)
        if current():
            await _delete(zk, path)


async def _carry_out(controller: Controller, plan: PartitionReassignment,
                     current: Callable[[], bool]) -> None:
    requests = [ReassignmentRequest(topic, partition, tuple(replicas))
                for (topic, partition), replicas in plan.replicas.items()]
    outcomes = await controller.alter_partition_reassignments(requests)
    accepted = []
    for request, (code, message) in zip(requests, outcomes, strict=True):
        where = f"{request.topic}-{request.partition}"
        if code:
            log.warning("reassignment of %s to %s from %s refused: %s %s", where,
                        list(request.replicas or ()), layout.REASSIGN_PARTITIONS,
                        code.name.upper(), message or "")
        else:
            accepted.append((request.topic, request.partition))
    log.info("controller: %d reassignment(s) from %s started", len(accepted),
             layout.REASSIGN_PARTITIONS)
    while current() and any(_moving(controller, topic, p) for topic, p in accepted):
        await asyncio.sleep(DONE_POLL_S)


def _moving(controller: Controller, topic: str, partition: int) -> bool:
    known = controller.image.topics_by_name.get(topic)
    state = None if known is None else known.partitions.get(partition)
    return state is not None and state.reassigning


async def _delete(zk: AsyncZooKeeper, path: str) -> None:
    try:
        await zk.delete(path)
    except NoNodeError:
        pass
    except KazooException as exc:
        log.info("deleting %s failed: %r", path, exc)
