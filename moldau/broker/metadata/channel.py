"""How a broker asks the active controller for a metadata change: :class:`ControllerChannel`.

Every metadata change a broker needs (topics a client creates, deletes or grows, dynamic
configs, topics created automatically, ``__consumer_offsets``, blocks of producer ids) goes
through this one asynchronous interface, whichever broker the request reached:

* :class:`~.controller.Controller` is the local implementation: this process is the active
  controller (a single node always is). It validates, writes one batch to its store, replays
  it into the image and tells listeners, before the call returns.
* :class:`~.forwarding.ForwardingControllerChannel` sends the change to the active controller
  over the inter-broker listener as an ordinary Kafka admin request and maps the answer back.

Results carry Kafka's error codes and messages, so a handler answers the same whichever
implementation it was given. Who the active controller is comes from the metadata image
(``MetadataImage.controller_id``), never from the broker's own id.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ...protocol.errors import ErrorCode
from .isr_change import IsrChange, IsrChangeResult
from .reassignment import OngoingReassignment, ReassignmentRequest

# A block of producer ids, as Kafka's controller hands them out (ProducerIdsBlock.PRODUCER_ID_
# BLOCK_SIZE).
PRODUCER_ID_BLOCK = 1000

# (error, message) of one change; ErrorCode.none when it was made.
Outcome = tuple[ErrorCode, str | None]


@dataclass
class TopicSpec:
    """A topic to create; -1 partitions/replication factor means the broker default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class TopicResult:
    """What became of one :class:`TopicSpec`."""

    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


class ControllerChannel(Protocol):
    """The metadata changes a broker may ask of the active controller."""

    async def create_topics(self, specs: Sequence[TopicSpec], *,
                            validate_only: bool = False) -> list[TopicResult]:
        """Create topics (each on its own: one refused does not stop the others)."""
        ...

    async def delete_topics(self, names: Sequence[str]) -> dict[str, Outcome]:
        """Delete topics by name."""
        ...

    async def create_partitions(self, name: str, total: int,
                                assignments: list[list[int]] | None, *,
                                validate_only: bool = False) -> Outcome:
        """Grow topic ``name`` to ``total`` partitions."""
        ...

    async def alter_configs(self, resource_type: int, name: str,
                            changes: Mapping[str, str | None], *, replace: bool = False,
                            validate_only: bool = False) -> Outcome:
        """Set (value) or delete (None) dynamic configs of a topic or broker."""
        ...

    async def incremental_alter_configs(self, resource_type: int, name: str,
                                        ops: Sequence[tuple[str, int, str | None]], *,
                                        validate_only: bool = False) -> Outcome:
        """Apply IncrementalAlterConfigs operations (key, op, value) to one resource."""
        ...

    async def allocate_producer_ids(self, broker_id: int,
                                    count: int = PRODUCER_ID_BLOCK) -> range:
        """A block of producer ids for ``broker_id``; raises KafkaError when none can be
        allocated."""
        ...

    async def alter_partition(self, broker_id: int, changes: Sequence[IsrChange]
                              ) -> list[IsrChangeResult]:
        """ISR changes of partitions ``broker_id`` leads (AlterPartition); one result per
        change, in order."""
        ...

    async def alter_partition_reassignments(self, requests: Sequence[ReassignmentRequest]
                                            ) -> list[Outcome]:
        """Start, redirect or cancel (target None) partition reassignments (KIP-455); one
        outcome per request, in order."""
        ...

    async def list_partition_reassignments(
            self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None
    ) -> list[OngoingReassignment]:
        """The reassignments in progress (all, or of the named topics' partitions); raises
        KafkaError when the controller cannot be asked."""

    async def elect_leaders(self, election_type: int,
                            partitions: Sequence[tuple[str, int]] | None
                            ) -> dict[tuple[str, int], Outcome]:
        """ElectLeaders (PREFERRED 0 / UNCLEAN 1) of ``partitions`` (None: all); an outcome
        per partition (see :mod:`.leader_election`)."""
        ...
