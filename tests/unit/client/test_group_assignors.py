"""Client-side assignors: range, roundrobin, sticky, cooperative-sticky (no sockets)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.client.errors import ConfigError
from moldau.client.group.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    is_cooperative,
    make_assignors,
    parse_strategies,
)
from moldau.client.group.consumer_protocol import (
    decode_subscription,
    encode_sticky_user_data,
    encode_subscription,
)
from moldau.client.group.sticky import cooperative_adjust, current_owners, sticky_assign
from moldau.client.group.types import MemberSubscription
from moldau.client.types import TopicPartition as TP


def sub(member: str, *topics: str, owned: tuple[TP, ...] = (), generation: int = -1,
        instance: str | None = None) -> MemberSubscription:
    return MemberSubscription(member, tuple(topics), owned, generation, instance)


def tps(topic: str, *parts: int) -> list[TP]:
    return [TP(topic, p) for p in parts]


def check_valid(assignment: dict[str, list[TP]], partitions: dict[str, int],
                members: list[MemberSubscription]) -> None:
    """Every partition of a subscribed topic exactly once, only to subscribers."""
    seen: list[TP] = [tp for parts in assignment.values() for tp in parts]
    assert len(seen) == len(set(seen)), "a partition was assigned twice"
    wanted = {TP(t, p) for m in members for t in m.topics if t in partitions
              for p in range(partitions[t])}
    assert set(seen) == wanted
    by_id = {m.member_id: m for m in members}
    for member, parts in assignment.items():
        assert all(tp.topic in by_id[member].topics for tp in parts)


# --- range --------------------------------------------------------------------------------

def test_range_six_partitions_three_members() -> None:
    members = [sub("c", "t"), sub("a", "t"), sub("b", "t")]
    result = RangeAssignor().assign({"t": 6}, members)
    assert result == {"a": tps("t", 0, 1), "b": tps("t", 2, 3), "c": tps("t", 4, 5)}


def test_range_uneven_and_per_topic() -> None:
    members = [sub("a", "x", "y"), sub("b", "x", "y")]
    result = RangeAssignor().assign({"x": 3, "y": 3}, members)
    # each topic on its own: the first member gets the extra partition of both
    assert result == {"a": tps("x", 0, 1) + tps("y", 0, 1), "b": tps("x", 2) + tps("y", 2)}


def test_range_only_subscribers_and_missing_topics() -> None:
    members = [sub("a", "x"), sub("b", "x", "y"), sub("c", "nope")]
    result = RangeAssignor().assign({"x": 4, "y": 2}, members)
    assert result == {"a": tps("x", 0, 1), "b": tps("x", 2, 3) + tps("y", 0, 1), "c": []}


def test_range_orders_static_members_by_instance_id() -> None:
    # Static members sort by group.instance.id (so a restart with a new member id keeps
    # the same ranges), before dynamic ones.
    members = [sub("zzz", "t", instance="i-1"), sub("aaa", "t", instance="i-2"),
               sub("bbb", "t")]
    result = RangeAssignor().assign({"t": 3}, members)
    assert result == {"zzz": tps("t", 0), "aaa": tps("t", 1), "bbb": tps("t", 2)}


# --- roundrobin ---------------------------------------------------------------------------

def test_roundrobin_interleaves() -> None:
    members = [sub("a", "x", "y"), sub("b", "x", "y")]
    result = RoundRobinAssignor().assign({"x": 3, "y": 2}, members)
    assert result == {"a": [TP("x", 0), TP("x", 2), TP("y", 1)],
                      "b": [TP("x", 1), TP("y", 0)]}


def test_roundrobin_skips_non_subscribers() -> None:
    members = [sub("a", "x"), sub("b", "x", "y"), sub("c", "y")]
    result = RoundRobinAssignor().assign({"x": 2, "y": 3}, members)
    check_valid(result, {"x": 2, "y": 3}, members)
    assert result["a"] == [TP("x", 0)]
    assert result["b"] == [TP("x", 1), TP("y", 1)]
    assert result["c"] == [TP("y", 0), TP("y", 2)]


# --- sticky (eager) -----------------------------------------------------------------------

def test_sticky_balanced_fresh() -> None:
    members = [sub(m, "t") for m in "abc"]
    result = StickyAssignor().assign({"t": 7}, members)
    check_valid(result, {"t": 7}, members)
    assert sorted(len(v) for v in result.values()) == [2, 2, 3]


def test_sticky_reads_previous_assignment_from_user_data() -> None:
    # Eager members revoked everything before joining: what they held is in user data.
    ud = {m: encode_sticky_user_data(parts, 4) for m, parts in
          {"a": tps("t", 0, 3), "b": tps("t", 1, 4), "c": tps("t", 2, 5)}.items()}
    members = [MemberSubscription(m, ("t",), (), -1, None, None, ud[m]) for m in "abc"]
    # a new member joins: each old member gives up exactly one partition
    members.append(sub("d", "t"))
    result = StickyAssignor().assign({"t": 6}, members)
    check_valid(result, {"t": 6}, members)
    for m, old in {"a": {0, 3}, "b": {1, 4}, "c": {2, 5}}.items():
        assert {tp.partition for tp in result[m]} <= old
    assert sorted(len(v) for v in result.values()) == [1, 1, 2, 2]


def test_sticky_member_leaves_others_keep_theirs() -> None:
    owned = {"a": tps("t", 0, 1), "b": tps("t", 2, 3), "c": tps("t", 4, 5)}
    owners = {tp: m for m, parts in owned.items() for tp in parts}
    del owned["b"]
    owners = {tp: m for tp, m in owners.items() if m != "b"}
    result = sticky_assign({"t": 6}, {"a": ["t"], "c": ["t"]}, owners)
    assert set(tps("t", 0, 1)) <= set(result["a"])
    assert set(tps("t", 4, 5)) <= set(result["c"])
    assert len(result["a"]) == len(result["c"]) == 3


def test_sticky_different_subscriptions_balance() -> None:
    # Only b can take y; x is shared, so a should get most of x.
    members = [sub("a", "x"), sub("b", "x", "y")]
    result = StickyAssignor().assign({"x": 4, "y": 2}, members)
    check_valid(result, {"x": 4, "y": 2}, members)
    assert len(result["a"]) == 3 and len(result["b"]) == 3


def test_current_owners_highest_generation_wins_ties_drop() -> None:
    claims = {
        "a": (tps("t", 0, 1), 5),
        "b": (tps("t", 0), 4),       # older claim on 0: a keeps it
        "c": (tps("t", 1, 2), 5),    # same generation as a on 1: nobody keeps 1
    }
    owners = current_owners(claims)
    assert owners == {TP("t", 0): "a", TP("t", 2): "c"}


# --- cooperative-sticky: two-phase revocation ---------------------------------------------

def run_cooperative(partitions: dict[str, int], owned: dict[str, set[TP]],
                    subs: dict[str, tuple[str, ...]], generation: int
                    ) -> tuple[dict[str, set[TP]], dict[str, set[TP]]]:
    """One rebalance: returns (new ownership, revoked per member)."""
    members = [sub(m, *subs[m], owned=tuple(sorted(owned.get(m, set()))),
                   generation=generation) for m in subs]
    result = CooperativeStickyAssignor().assign(partitions, members)
    new = {m: set(v) for m, v in result.items()}
    revoked = {m: owned.get(m, set()) - new[m] for m in subs}
    return new, revoked


def assert_no_double_ownership(ownership: dict[str, set[TP]]) -> None:
    flat = [tp for parts in ownership.values() for tp in parts]
    assert len(flat) == len(set(flat))


def test_cooperative_new_member_two_phases() -> None:
    partitions = {"t": 6}
    owned = {"a": set(tps("t", 0, 1, 2)), "b": set(tps("t", 3, 4, 5))}
    subs = {"a": ("t",), "b": ("t",), "c": ("t",)}
    # Phase 1: a and b each give one partition up; c gets nothing yet.
    phase1, revoked = run_cooperative(partitions, owned, subs, 3)
    assert phase1["c"] == set()
    assert len(revoked["a"]) == 1 and len(revoked["b"]) == 1
    assert phase1["a"] <= owned["a"] and phase1["b"] <= owned["b"]
    assert_no_double_ownership(phase1)
    # Phase 2 (the revoking members rejoined): the released partitions go to c.
    phase2, revoked2 = run_cooperative(partitions, phase1, subs, 4)
    assert phase2["a"] == phase1["a"] and phase2["b"] == phase1["b"]
    assert phase2["c"] == revoked["a"] | revoked["b"]
    assert not any(revoked2.values())
    assert_no_double_ownership(phase2)


def test_cooperative_member_leaves_single_phase() -> None:
    # Partitions of a member that left are free: handed out in the first rebalance.
    partitions = {"t": 6}
    owned = {"a": set(tps("t", 0, 1)), "c": set(tps("t", 4, 5))}
    new, revoked = run_cooperative(partitions, owned, {"a": ("t",), "c": ("t",)}, 7)
    assert not any(revoked.values())
    assert owned["a"] <= new["a"] and owned["c"] <= new["c"]
    assert new["a"] | new["c"] == set(tps("t", *range(6)))


def test_cooperative_adjust_withholds_moving_partitions_only() -> None:
    target = {"a": tps("t", 0), "b": tps("t", 1, 2)}
    owners = {TP("t", 0): "a", TP("t", 1): "a", TP("t", 2): "gone"}
    assert cooperative_adjust(target, owners) == {"a": tps("t", 0), "b": tps("t", 2)}


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(1, 8), min_size=1, max_size=3),
    n_members=st.integers(1, 6),
    data=st.data(),
)
def test_sticky_properties(counts: list[int], n_members: int, data: st.DataObject) -> None:
    """Valid and balanced for identical subscriptions; converges cooperatively in two
    rebalances after any change, never owning a partition twice."""
    partitions = {f"t{i}": n for i, n in enumerate(counts)}
    topics = tuple(partitions)
    total = sum(counts)
    members = [f"m{i}" for i in range(n_members)]
    subs = {m: topics for m in members}
    fresh = sticky_assign(partitions, subs, {})
    check_valid(fresh, partitions, [sub(m, *topics) for m in members])
    sizes = [len(v) for v in fresh.values()]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == total
    # Some members leave and some join: the survivors keep what they can.
    leaving = set(data.draw(st.lists(st.sampled_from(members), max_size=n_members - 1,
                                     unique=True)))
    joining = [f"n{i}" for i in range(data.draw(st.integers(0, 3)))]
    survivors = [m for m in members if m not in leaving]
    owned = {m: set(fresh[m]) for m in survivors}
    subs2 = {m: topics for m in survivors + joining}
    phase1, _ = run_cooperative(partitions, owned, subs2, 2)
    assert_no_double_ownership(phase1)
    held = set().union(*owned.values()) if owned else set()
    for m in phase1:
        # Nobody gets a partition another live member still holds (it is revoked first).
        assert phase1[m] - owned.get(m, set()) <= set().union(
            *(fresh[x] for x in members)) - held
    phase2, revoked = run_cooperative(partitions, phase1, subs2, 3)
    assert not any(revoked.values())
    sizes = [len(v) for v in phase2.values()]
    assert sum(sizes) == total and max(sizes) - min(sizes) <= 1
    quota = total // len(subs2)
    for m in survivors:  # sticky: a survivor keeps its old partitions up to its quota
        assert len(phase2[m] & owned[m]) >= min(len(owned[m]), quota)


# --- config and protocol choice -----------------------------------------------------------

def test_parse_strategies() -> None:
    assert parse_strategies("s", "range,cooperative-sticky") == ("range", "cooperative-sticky")
    assert parse_strategies("s", "org.apache.kafka.clients.consumer.RoundRobinAssignor, "
                                 "Sticky") == ("roundrobin", "sticky")
    with pytest.raises(ConfigError, match="unknown assignor 'uniform'"):
        parse_strategies("partition.assignment.strategy", "uniform")
    with pytest.raises(ConfigError, match="empty"):
        parse_strategies("partition.assignment.strategy", " , ")


def test_cooperative_only_when_every_assignor_is() -> None:
    assert not is_cooperative(make_assignors(["range", "cooperative-sticky"]))
    assert is_cooperative(make_assignors(["cooperative-sticky"]))


def test_cooperative_sticky_reads_owned_from_subscription() -> None:
    raw = encode_subscription(["t"], owned=tps("t", 1), generation=9,
                              user_data=CooperativeStickyAssignor().user_data([], 9))
    member = decode_subscription("a", raw)
    other = sub("b", "t", owned=(TP("t", 0),), generation=9)
    result = CooperativeStickyAssignor().assign({"t": 2}, [member, other])
    assert result == {"a": tps("t", 1), "b": tps("t", 0)}
