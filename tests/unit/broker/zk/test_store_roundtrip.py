"""The store's multi-ops and the snapshot's diff agree: whatever the controller does (random
sequences of its operations), the znodes it writes decode into records whose replay gives
exactly its image — the property that lets every broker's sync find nothing to replay after
the controller's own writes. ZooKeeper's semantics for the ops (parents, versions, empty
deletes, sequential names) are applied to a dict, the layout and the records are the real
ones; tests/integration/zk runs the same against real ZooKeeper."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.protocol.states import ZnodeStat

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.controller import Controller
from moldau.broker.metadata.image import RECOVERED, RECOVERING, MetadataImage
from moldau.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
)
from moldau.broker.zk import layout
from moldau.broker.zk.admin_layout import ProducerIdBlock
from moldau.broker.zk.layout import BrokerRegistration, Endpoint
from moldau.broker.zk.snapshot import CHILDREN_PATHS, decode, diff
from moldau.broker.zk.store import Facts, Op, optional_paths, plan_ops


class Tree:
    """ZooKeeper's data tree, as the multi-op semantics need it."""

    def __init__(self) -> None:
        self.nodes: dict[str, list] = {"/": [b"", 0, 0, 0]}  # data, version, czxid, mzxid
        self.zxid = 0
        self.sequence = 0
        for path in [*layout.PERSISTENT_PATHS, layout.CONFIG]:
            self.ensure(path)

    def ensure(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            if sub not in self.nodes:
                self.apply([Op("create", sub)])

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.nodes
                      if p.startswith(prefix) and "/" not in p[len(prefix):])

    def apply(self, ops: Sequence[Op]) -> None:
        """All or nothing, as a multi-op."""
        nodes = {k: list(v) for k, v in self.nodes.items()}
        zxid = self.zxid + 1
        for op in ops:
            if op.kind == "create":
                path = op.path
                if op.sequence:
                    path = f"{op.path}{self.sequence:010d}"
                    self.sequence += 1
                assert path not in nodes, f"NodeExists {path}"
                assert path.rsplit("/", 1)[0] or "/" in nodes, f"NoNode parent of {path}"
                nodes[path] = [op.data, 0, zxid, zxid]
            elif op.kind == "set":
                assert op.path in nodes, f"NoNode {op.path}"
                assert op.version in (-1, nodes[op.path][1]), f"BadVersion {op}"
                nodes[op.path] = [op.data, nodes[op.path][1] + 1, nodes[op.path][2], zxid]
            else:
                assert op.path in nodes, f"NoNode {op.path}"
                assert not any(p.startswith(op.path + "/") for p in nodes), f"NotEmpty {op}"
                del nodes[op.path]
        self.nodes, self.zxid = nodes, zxid

    def read(self) -> tuple[dict, dict]:
        children = {p: self.children(p) for p in CHILDREN_PATHS}
        data = {p: (v[0], ZnodeStat(v[2], v[3], 0, 0, v[1], 0, 0, 0, 0, 0, v[3]))
                for p, v in self.nodes.items()}
        return data, children


class TreeStore:
    """The store's planning (plan_ops and the facts it reads) over a :class:`Tree`."""

    def __init__(self, tree: Tree, image: MetadataImage) -> None:
        self.tree = tree
        self.image = image

    def facts(self, records: Sequence[MetadataRecord]) -> Facts:
        facts = Facts(existing={p for p in optional_paths(self.image, records)
                                if p in self.tree.nodes})
        for record in records:
            if isinstance(record, RemoveTopicRecord):
                name = self.image.topics_by_id[record.topic_id].name
                root = layout.topic_path(name)
                facts.topic_trees[name] = sorted(
                    (p for p in self.tree.nodes if p == root or p.startswith(root + "/")),
                    key=lambda p: -p.count("/"))
            if isinstance(record, ProducerIdsRecord):
                node = self.tree.nodes[layout.LATEST_PRODUCER_ID_BLOCK]
                facts.producer_block = ProducerIdBlock.from_json(node[0]) if node[0] else None
                facts.producer_block_version = node[1]
        return facts

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        self.tree.apply(plan_ops(self.image, records, 1, self.facts(records)))
        return self.image.offset + len(records)


def _cluster() -> tuple[Tree, Controller]:
    tree = Tree()
    image = MetadataImage()
    controller = Controller(image, TreeStore(tree, image), default_partitions=lambda: 2,
                            default_replication_factor=lambda: 2)
    for broker_id, rack in ((1, "a"), (2, "b"), (3, "a")):
        registration = BrokerRegistration(
            broker_id, (Endpoint("PLAINTEXT", "h", 9000 + broker_id, "PLAINTEXT"),), rack=rack)
        tree.apply([Op("create", layout.broker_path(broker_id), registration.to_json())])
    tree.apply([Op("create", layout.CONTROLLER, layout.ControllerRegistration(1).to_json()),
                Op("create", layout.CONTROLLER_EPOCH, b"1")])
    # the image starts as every broker's sync leaves it
    for record in diff(image, decode(*tree.read())):
        image.replay(record)
    return tree, controller


NAMES = st.sampled_from(["a", "b", "c.d", "e_f"])
OPERATION = st.one_of(
    st.tuples(st.just("create"), NAMES, st.integers(1, 6), st.integers(1, 3),
              st.dictionaries(st.sampled_from(["retention.ms", "segment.ms"]),
                              st.integers(1, 10**9).map(str), max_size=2)),
    st.tuples(st.just("grow"), NAMES, st.integers(1, 3)),
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("leader"), NAMES, st.integers(0, 5), st.integers(-1, 3)),
    # an unclean election (KIP-704 RECOVERING), then the leader's ISR change (RECOVERED)
    st.tuples(st.just("unclean"), NAMES, st.integers(0, 5), st.integers(1, 3)),
    st.tuples(st.just("recovered"), NAMES, st.integers(0, 5)),
    st.tuples(st.just("config"), NAMES, st.sampled_from(["retention.ms", "cleanup.policy"]),
              st.sampled_from([None, "compact", "1000"])),
    st.tuples(st.just("broker_config"), st.sampled_from(["", "2"]),
              st.sampled_from([None, "1000", "2000"])),
    st.tuples(st.just("producer_ids"), st.integers(1, 3)),
)


async def _run(operations: list) -> Controller:
    """Apply ``operations`` through the controller; after each, the znodes decode into its
    image, and into the same image from scratch."""
    tree, controller = _cluster()
    image = controller.image
    for operation in operations:
        kind, name = operation[0], operation[1]
        if kind == "create":
            await controller.create_topics([TopicSpec(name, operation[2], operation[3],
                                                      configs=operation[4])])
        elif kind == "grow" and name in image.topics_by_name:
            total = len(image.topics_by_name[name].partitions) + operation[2]
            await controller.create_partitions(name, total, None)
        elif kind == "delete":
            await controller.delete_topics([name])
        elif kind == "leader" and name in image.topics_by_name:
            topic = image.topics_by_name[name]
            p = operation[2] % len(topic.partitions)
            leader = operation[3]
            isr = topic.partitions[p].isr if leader == -1 else [leader]
            await controller.change_partition(topic.topic_id, p, leader=leader, isr=isr)
        elif kind in ("unclean", "recovered") and name in image.topics_by_name:
            topic = image.topics_by_name[name]
            p = operation[2] % len(topic.partitions)
            state = topic.partitions[p]
            leader = operation[3] if kind == "unclean" else None
            isr = [operation[3]] if kind == "unclean" else [*state.isr, 9]
            await controller.commit([PartitionChangeRecord(
                topic.topic_id, p, leader=leader, isr=isr,
                leader_recovery_state=RECOVERING if kind == "unclean" else RECOVERED)])
        elif kind == "config":
            await controller.alter_configs(TOPIC_RESOURCE, name, {operation[2]: operation[3]})
        elif kind == "broker_config":
            await controller.alter_configs(BROKER_RESOURCE, name,
                                           {"log.retention.ms": operation[2]})
        elif kind == "producer_ids":
            await controller.allocate_producer_ids(operation[1])
        state = decode(*tree.read())
        assert diff(image, state) == [], operation
        fresh = MetadataImage()
        for record in diff(fresh, state):
            fresh.replay(record)
        assert diff(fresh, state) == []
        assert {n: {p: vars(s) for p, s in t.partitions.items()}
                for n, t in fresh.topics_by_name.items()} == {
            n: {p: vars(s) for p, s in t.partitions.items()}
            for n, t in image.topics_by_name.items()}
    return controller


@settings(max_examples=60, deadline=None)
@given(st.lists(OPERATION, max_size=12))
def test_the_znodes_written_decode_into_the_controllers_image(operations: list) -> None:
    asyncio.run(_run(operations))


def test_a_sequence_of_every_operation_round_trips() -> None:
    """One fixed run through every operation (the property above explores the others)."""
    controller = asyncio.run(_run([
        ("create", "a", 4, 3, {"retention.ms": "5"}), ("create", "b", 2, 1, {}),
        ("grow", "a", 2), ("leader", "a", 1, -1), ("leader", "a", 1, 2),
        ("unclean", "a", 0, 3), ("unclean", "a", 1, 2), ("recovered", "a", 1),
        ("leader", "a", 0, 1),
        ("config", "a", "cleanup.policy", "compact"), ("config", "a", "retention.ms", None),
        ("broker_config", "", "1000"), ("broker_config", "2", "2000"),
        ("producer_ids", 2), ("producer_ids", 3), ("delete", "a"),
        ("create", "a", 1, 1, {})]))
    image = controller.image
    assert {n: len(t.partitions) for n, t in image.topics_by_name.items()} == {"a": 1, "b": 2}
    assert image.topics_by_name["b"].partitions[0].leader_recovery_state == RECOVERED
    assert image.broker_configs == {"": {"log.retention.ms": "1000"},
                                    "2": {"log.retention.ms": "2000"}}
    assert image.next_producer_id == 2000
