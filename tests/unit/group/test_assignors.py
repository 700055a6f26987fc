"""Server-side assignors and the reconciliation step of KIP-848 groups."""

import uuid

from moldau.broker.group.assignors import range_assign, uniform_assign
from moldau.broker.group.consumer_group import ConsumerMember, MemberState, reconcile

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def counts(assignment: dict) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in assignment.items()}


def all_partitions(assignment: dict) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for a in assignment.values() for t, ps in a.items() for p in ps)


def test_uniform_balances_and_covers_everything() -> None:
    subs = {m: {T1} for m in "abc"}
    got = uniform_assign(subs, {T1: 6}, {})
    assert counts(got) == {"a": 2, "b": 2, "c": 2}
    assert all_partitions(got) == [(T1, p) for p in range(6)]


def test_uniform_is_sticky() -> None:
    subs = {m: {T1} for m in "abc"}
    first = uniform_assign(subs, {T1: 6}, {})
    # d joins: one partition moves (2,2,1,1), everyone else keeps what it had.
    subs["d"] = {T1}
    second = uniform_assign(subs, {T1: 6}, first)
    assert sorted(counts(second).values()) == [1, 1, 2, 2]
    moved = sum(len(first[m][T1] - second[m].get(T1, set())) for m in "abc")
    assert moved == 1
    # c leaves: its partitions go to the others, nothing else moves.
    del subs["c"]
    third = uniform_assign(subs, {T1: 6}, second)
    for m in "abd":
        assert second[m].get(T1, set()) <= third[m].get(T1, set())
    assert all_partitions(third) == [(T1, p) for p in range(6)]


def test_uniform_heterogeneous_subscriptions() -> None:
    subs = {"a": {T1}, "b": {T1, T2}}
    got = uniform_assign(subs, {T1: 6, T2: 6}, {})
    assert counts(got) == {"a": 6, "b": 6}
    assert got["a"] == {T1: set(range(6))}


def test_range_assigns_contiguous_ranges() -> None:
    subs = {"b": {T1, T2}, "a": {T1, T2}, "c": {T1}}
    got = range_assign(subs, {T1: 7, T2: 3}, {})
    assert got["a"][T1] == {0, 1, 2} and got["b"][T1] == {3, 4} and got["c"][T1] == {5, 6}
    assert got["a"][T2] == {0, 1} and got["b"][T2] == {2}


def free(_t: uuid.UUID, _p: int) -> int:
    return -1


def test_reconcile_revokes_before_assigning() -> None:
    member = ConsumerMember("m", member_epoch=3, assigned={T1: {0, 1, 2}})
    step = reconcile(member, 4, {T1: {0, 3}}, owned=None, partition_epoch=free)
    # 1 and 2 must go first; 3 is not handed out yet; the epoch stays.
    assert step.state == MemberState.UNREVOKED_PARTITIONS
    assert step.assigned == {T1: {0}} and step.pending_revocation == {T1: {1, 2}}
    assert step.member_epoch == 3
    # A heartbeat that still owns a revoked partition changes nothing.
    assert reconcile(step, 4, {T1: {0, 3}}, {T1: {0, 1}}, free) is step
    # Once it owns only partition 0 it moves to epoch 4 and gets 3.
    done = reconcile(step, 4, {T1: {0, 3}}, {T1: {0}}, free)
    assert done.state == MemberState.STABLE and done.member_epoch == 4
    assert done.previous_member_epoch == 3 and done.assigned == {T1: {0, 3}}


def test_reconcile_holds_back_partitions_still_owned_elsewhere() -> None:
    owners = {(T1, 1): 5}
    member = ConsumerMember("m", member_epoch=5, assigned={T1: {0}})
    step = reconcile(member, 6, {T1: {0, 1}}, None, lambda t, p: owners.get((t, p), -1))
    assert step.state == MemberState.UNRELEASED_PARTITIONS
    assert step.member_epoch == 6 and step.assigned == {T1: {0}}
    owners.clear()  # the other member gave partition 1 up
    done = reconcile(step, 6, {T1: {0, 1}}, None, free)
    assert done.state == MemberState.STABLE and done.assigned == {T1: {0, 1}}


def test_reconcile_is_identity_when_stable_at_target() -> None:
    member = ConsumerMember("m", member_epoch=2, assigned={T1: {0}})
    assert reconcile(member, 2, {T1: {0}}, None, free) is member
