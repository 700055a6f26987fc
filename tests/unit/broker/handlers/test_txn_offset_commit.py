"""TxnOffsetCommit (28) and OffsetFetch ``require_stable`` through the handlers of a fake node,
as a client reads them: unknown partitions, v0 (no membership) and v3 (KIP-447), an empty
group id, pending offsets answered UNSTABLE_OFFSET_COMMIT to v7-v8 stable fetches until the
end marker, and a node without a transaction verifier refusing to write. The verifier is a
fake (the transaction coordinator's lives elsewhere); everything else is the node's."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from moldau.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

from .fakes import call
from .test_groups import coordinating

GROUP = "g"


class FakeVerifier:
    def __init__(self, answer: int = E.none) -> None:
        self.answer = answer

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     tps: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        return {tp: self.answer for tp in tps}


def txn_body(version: int, offsets: dict[int, int], group: str = GROUP) -> dict[str, Any]:
    body: dict[str, Any] = {
        "transactional_id": "tx", "group_id": group, "producer_id": 77, "producer_epoch": 0,
        "topics": [{"name": "t", "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p, o in offsets.items()]}]}
    if version >= 3:
        body.update(generation_id=-1, member_id="", group_instance_id=None)
    return body


def codes(answer: dict[str, Any]) -> dict[int, int]:
    return {p["partition_index"]: p["error_code"] for p in answer["topics"][0]["partitions"]}


async def fetch(node: Any, version: int, stable: bool) -> dict[int, tuple[int, int]]:
    topics = [{"name": "t", "partition_indexes": [0, 1]}]
    if version >= 8:
        answer = await call(node, ApiKey.OFFSET_FETCH, version, {
            "groups": [{"group_id": GROUP, "topics": topics}], "require_stable": stable})
        found = answer["groups"][0]["topics"][0]["partitions"]
    else:
        answer = await call(node, ApiKey.OFFSET_FETCH, version, {
            "group_id": GROUP, "topics": topics, "require_stable": stable})
        found = answer["topics"][0]["partitions"]
    return {p["partition_index"]: (p["committed_offset"], p["error_code"]) for p in found}


def test_txn_offsets_are_pending_until_the_marker_and_stable_fetches_wait(
        tmp_path: Path) -> None:
    async def main() -> None:
        node = await coordinating(tmp_path)
        node.txn_verifier = FakeVerifier()
        committed = await call(node, ApiKey.TXN_OFFSET_COMMIT, 3, txn_body(3, {0: 5, 9: 1}))
        assert codes(committed) == {0: E.none, 9: E.unknown_topic_or_partition}
        assert await fetch(node, 7, False) == {0: (-1, 0), 1: (-1, 0)}
        assert await fetch(node, 7, True) == {0: (-1, E.unstable_offset_commit), 1: (-1, 0)}
        assert await fetch(node, 8, True) == {0: (-1, E.unstable_offset_commit), 1: (-1, 0)}
        coordinator = node.group_coordinator
        assert coordinator is not None
        await coordinator.write_end_marker(partition_for(GROUP, 5), 77, 0, 0, True)
        assert await fetch(node, 7, True) == {0: (5, 0), 1: (-1, 0)}
        # v0 carries no membership; an abort leaves the committed offset.
        again = await call(node, ApiKey.TXN_OFFSET_COMMIT, 0, txn_body(0, {0: 9, 1: 3}))
        assert codes(again) == {0: E.none, 1: E.none}
        await coordinator.write_end_marker(partition_for(GROUP, 5), 77, 0, 0, False)
        assert await fetch(node, 8, True) == {0: (5, 0), 1: (-1, 0)}
        await node.close()

    asyncio.run(main())


def test_txn_offset_commit_refusals(tmp_path: Path) -> None:
    async def main() -> None:
        node = await coordinating(tmp_path)
        # No verifier on this node: nothing is written unverified.
        refused = await call(node, ApiKey.TXN_OFFSET_COMMIT, 3, txn_body(3, {0: 5}))
        assert codes(refused) == {0: E.coordinator_not_available}
        node.txn_verifier = FakeVerifier(E.invalid_txn_state)
        refused = await call(node, ApiKey.TXN_OFFSET_COMMIT, 4, txn_body(4, {0: 5}))
        assert codes(refused) == {0: E.invalid_txn_state}
        node.txn_verifier = FakeVerifier()
        empty = await call(node, ApiKey.TXN_OFFSET_COMMIT, 3, txn_body(3, {0: 5}, group=""))
        assert codes(empty) == {0: E.invalid_group_id}
        assert await fetch(node, 7, True) == {0: (-1, 0), 1: (-1, 0)}
        await node.close()

    asyncio.run(main())


def test_a_group_led_elsewhere_gets_not_coordinator(tmp_path: Path) -> None:
    async def main() -> None:
        node = await coordinating(tmp_path, {partition_for(GROUP, 5): 2})
        node.txn_verifier = FakeVerifier()
        answer = await call(node, ApiKey.TXN_OFFSET_COMMIT, 2, txn_body(2, {0: 5}))
        assert codes(answer) == {0: E.not_coordinator}
        assert OFFSETS_TOPIC in node.image.topics_by_name
        await node.close()

    asyncio.run(main())
