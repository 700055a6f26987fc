"""Client-side partition assignors of the classic protocol: ``range``, ``roundrobin``,
``sticky`` and ``cooperative-sticky``, named as the Java client and librdkafka name them.

The group's leader runs the assignor the coordinator selected (the one every member
supports that most members prefer) over all members' subscriptions. Members of one group
may be different clients: only the embedded bytes (:mod:`.consumer_protocol`) must agree,
so a Moldau leader assigns for confluent-kafka members and the other way round.

``partition.assignment.strategy`` also accepts the Java class names
(``org.apache.kafka.clients.consumer.RangeAssignor``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..errors import ConfigError
from ..types import TopicPartition
from .consumer_protocol import (
    encode_generation_user_data,
    encode_sticky_user_data,
    member_ownership,
)
from .sticky import Assignment, cooperative_adjust, current_owners, sticky_assign
from .types import MemberSubscription


class Assignor:
    """Base of the assignors: a name, the rebalance protocol it supports, ``assign``."""

    name = ""
    cooperative = False  # supports incremental cooperative rebalancing (KIP-429)

    def assign(self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
               ) -> Assignment:
        """Member id -> partitions, for every member (empty lists included).

        ``partitions`` has the partition count of every subscribed topic that exists.
        """
        raise NotImplementedError

    def user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes | None:
        """What this member adds to its subscription for this assignor."""
        return None


def _ordered(members: Sequence[MemberSubscription]) -> list[MemberSubscription]:
    return sorted(members, key=MemberSubscription.sort_key)


class RangeAssignor(Assignor):
    """Per topic, consecutive ranges of partitions to the members (in member order) that
    subscribe to it; the first ``partitions % members`` get one more."""

    name = "range"

    def assign(self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
               ) -> Assignment:
        result: Assignment = {m.member_id: [] for m in members}
        ordered = _ordered(members)
        for topic in sorted({t for m in members for t in m.topics}):
            count = partitions.get(topic)
            if not count:
                continue
            takers = [m for m in ordered if topic in m.topics]
            each, extra = divmod(count, len(takers))
            start = 0
            for i, m in enumerate(takers):
                n = each + (1 if i < extra else 0)
                result[m.member_id].extend(TopicPartition(topic, p)
                                           for p in range(start, start + n))
                start += n
        return result


class RoundRobinAssignor(Assignor):
    """All partitions in topic/partition order dealt out in turn to the members (in member
    order), skipping members that do not subscribe to the partition's topic."""

    name = "roundrobin"

    def assign(self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
               ) -> Assignment:
        result: Assignment = {m.member_id: [] for m in members}
        ordered = _ordered(members)
        if not ordered:
            return result
        turn = 0
        for topic in sorted({t for m in members for t in m.topics}):
            for p in range(partitions.get(topic, 0)):
                for step in range(len(ordered)):
                    member = ordered[(turn + step) % len(ordered)]
                    if topic in member.topics:
                        result[member.member_id].append(TopicPartition(topic, p))
                        turn = (turn + step + 1) % len(ordered)
                        break
        return result


class StickyAssignor(Assignor):
    """Balanced and sticky, eager protocol (Java's StickyAssignor): each member reports its
    previous assignment and generation in its user data, because it revokes everything
    before joining."""

    name = "sticky"

    def assign(self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
               ) -> Assignment:
        owners = current_owners({m.member_id: member_ownership(m, True) for m in members})
        return sticky_assign(partitions, {m.member_id: m.topics for m in members}, owners)

    def user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes | None:
        owned = list(owned)
        return encode_sticky_user_data(owned, generation) if generation >= 0 else None


class CooperativeStickyAssignor(Assignor):
    """Balanced and sticky with incremental cooperative rebalancing (KIP-429): members keep
    their partitions through a rebalance; partitions that move are revoked first and
    assigned in a follow-up rebalance."""

    name = "cooperative-sticky"
    cooperative = True

    def assign(self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
               ) -> Assignment:
        owners = current_owners({m.member_id: member_ownership(m, False) for m in members})
        target = sticky_assign(partitions, {m.member_id: m.topics for m in members}, owners)
        return cooperative_adjust(target, owners)

    def user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes | None:
        return encode_generation_user_data(generation)


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, StickyAssignor,
                        CooperativeStickyAssignor)
}
_JAVA_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def parse_strategies(name: str, value: object) -> tuple[str, ...]:
    """``partition.assignment.strategy``: comma-separated assignor names, in preference
    order; Java class names are accepted. Raises ConfigError naming unknown entries."""
    items = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    names: list[str] = []
    for raw in items:
        text = str(raw).strip()
        if not text:
            continue
        short = _JAVA_NAMES.get(text, text.lower())
        if short not in ASSIGNORS:
            raise ConfigError(
                f"{name}: unknown assignor {text!r}; use one or more of "
                f"{', '.join(ASSIGNORS)} (comma-separated, preferred first)"
            )
        if short not in names:
            names.append(short)
    if not names:
        raise ConfigError(f"{name} is empty; give at least one of {', '.join(ASSIGNORS)}")
    return tuple(names)


def make_assignors(names: Iterable[str]) -> list[Assignor]:
    return [ASSIGNORS[n]() for n in names]


def is_cooperative(assignors: Sequence[Assignor]) -> bool:
    """The rebalance protocol of a member: cooperative only when every configured assignor
    supports it (Java's rule, which makes "range,cooperative-sticky" eager)."""
    return bool(assignors) and all(a.cooperative for a in assignors)
