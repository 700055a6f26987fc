"""The admin client's consumer-group operations (ListGroups, DescribeGroups, DeleteGroups,
OffsetFetch, OffsetCommit as "nobody", OffsetDelete) and the lag report of
``moldau groups --describe``.

Group requests go to each group's coordinator (batched FindCoordinator where the broker
has it). Retriable answers (the coordinator moved or is loading) are retried with a fresh
lookup until ``default.api.timeout.ms``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from ..admin_types import (
    AdminError,
    GroupDescription,
    GroupListing,
    MemberDescription,
    PartitionLag,
)
from ..errors import BrokerError
from ..leaders import list_offsets
from ..types import BrokerInfo, TopicPartition
from . import requests
from .consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from .coordinator import COORDINATOR_ERRORS
from .offsets import (
    as_offset,
    commit_body,
    commit_errors,
    fetch_body,
    fetch_result,
    pick_version,
)
from .types import OffsetAndMetadata

if TYPE_CHECKING:
    from ..admin import AdminClient

# What an admin commit (generation -1, no member) hears from a group that has members.
_NOT_EMPTY = frozenset({ErrorCode.unknown_member_id, ErrorCode.illegal_generation,
                        ErrorCode.rebalance_in_progress})


class _Retry(Exception):
    """Some groups answered with a retriable error: ask again (after a new lookup)."""

    retriable = True


async def _coordinators(admin: AdminClient, group_ids: list[str]) -> dict[str, BrokerInfo]:
    return await admin.cluster.find_coordinators(group_ids)


async def _for_each_coordinator(admin: AdminClient, what: str, group_ids: Iterable[str],
                                call: Any) -> dict[str, Any]:
    """``call(node_id, [group ids]) -> {group: result or error code}`` per coordinator;
    groups with retriable codes are retried until default.api.timeout.ms."""
    pending = list(dict.fromkeys(group_ids))
    results: dict[str, Any] = {}

    async def attempt() -> None:
        nonlocal pending
        found = await _coordinators(admin, pending)
        by_node: dict[int, list[str]] = {}
        for group in pending:
            by_node.setdefault(found[group].node_id, []).append(group)
        retry: list[str] = []
        last: int | None = None
        for node, groups in by_node.items():
            answers = await call(node, groups, found)
            for group in groups:
                value = answers.get(group, ErrorCode.unknown_server_error)
                if isinstance(value, int) and value and (
                        value in COORDINATOR_ERRORS or ErrorCode(value).retriable):
                    retry.append(group)
                    last = value
                else:
                    results[group] = value
        pending = retry
        if retry:
            raise BrokerError(last or ErrorCode.coordinator_not_available,
                              context=f"{what} of {', '.join(retry)}")

    await admin._retrying(what, attempt)
    return results


def _raise_or_return(what: str, results: dict[Any, BrokerError | None],
                     raise_errors: bool) -> dict[Any, BrokerError | None]:
    failed = {k: v for k, v in results.items() if v is not None}
    if failed and raise_errors:
        raise AdminError(what, dict(failed))
    return results


# --- listing and describing ---------------------------------------------------------------

async def list_groups(admin: AdminClient, states: Iterable[str] | None,
                      types: Iterable[str] | None) -> list[GroupListing]:
    """Every group of every broker, filtered by state/type (case-insensitive)."""
    want_states = [s.lower() for s in states or ()]
    want_types = [t.lower() for t in types or ()]
    await admin._retrying("Metadata", lambda: admin.cluster.refresh())
    found: dict[str, GroupListing] = {}
    errors: dict[object, BrokerError] = {}
    for node in sorted(admin.cluster.brokers):
        async def send(node: int = node) -> Any:
            response = await admin.cluster.request(node, ApiKey.LIST_GROUPS,
                                                   requests.list_groups(states, types))
            if response.error_code and ErrorCode(response.error_code).retriable:
                raise BrokerError(response.error_code, context=f"ListGroups on broker {node}")
            return response

        response = await admin._retrying("ListGroups", send)
        if response.error_code:
            errors[f"broker {node}"] = BrokerError(response.error_code, context="ListGroups")
            continue
        for g in response.groups:
            state = getattr(g, "group_state", None)
            kind = getattr(g, "group_type", None)
            if want_states and state is not None and state.lower() not in want_states:
                continue
            if want_types and kind is not None and kind.lower() not in want_types:
                continue
            found[g.group_id] = GroupListing(g.group_id, g.protocol_type, state, kind)
    if errors:
        raise AdminError("list_groups", errors)
    return [found[g] for g in sorted(found)]


def _member(m: Any, protocol_type: str) -> MemberDescription:
    assignment: frozenset[TopicPartition] = frozenset()
    topics: tuple[str, ...] = ()
    if protocol_type == PROTOCOL_TYPE:
        try:
            assignment = frozenset(decode_assignment(bytes(m.member_assignment))[0])
        except ValueError:
            pass
        if m.member_metadata:
            try:
                topics = decode_subscription(m.member_id, bytes(m.member_metadata)).topics
            except ValueError:
                pass
    return MemberDescription(
        m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
        assignment, topics,
    )


async def describe_groups(admin: AdminClient, group_ids: Iterable[str], raise_errors: bool
                          ) -> dict[str, GroupDescription | BrokerError]:
    """State, assignor and members (assignments decoded) of each group."""
    async def call(node: int, groups: list[str], found: dict[str, BrokerInfo]
                   ) -> dict[str, Any]:
        response = await admin.cluster.request(node, ApiKey.DESCRIBE_GROUPS,
                                               requests.describe_groups(groups))
        out: dict[str, Any] = {}
        for g in response.groups:
            if g.error_code:
                out[g.group_id] = int(g.error_code)
                continue
            out[g.group_id] = GroupDescription(
                g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                tuple(_member(m, g.protocol_type) for m in g.members), found[g.group_id],
            )
        return out

    raw = await _for_each_coordinator(admin, "DescribeGroups", group_ids, call)
    out: dict[str, GroupDescription | BrokerError] = {
        g: BrokerError(v, context=f"describe group {g!r}") if isinstance(v, int) else v
        for g, v in raw.items()
    }
    failed = {g: v for g, v in out.items() if isinstance(v, BrokerError)}
    if failed and raise_errors:
        raise AdminError("describe_groups", dict(failed))
    return out


async def delete_groups(admin: AdminClient, group_ids: Iterable[str], raise_errors: bool
                        ) -> dict[str, BrokerError | None]:
    """Delete empty groups and their offsets (NON_EMPTY_GROUP while members remain)."""
    async def call(node: int, groups: list[str], _found: Any) -> dict[str, int]:
        response = await admin.cluster.request(node, ApiKey.DELETE_GROUPS,
                                               requests.delete_groups(groups))
        return {r.group_id: int(r.error_code) for r in response.results}

    raw = await _for_each_coordinator(admin, "DeleteGroups", group_ids, call)
    results: dict[str, BrokerError | None] = {
        g: BrokerError(code, _hint(code), f"delete group {g!r}") if code else None
        for g, code in raw.items()
    }
    return _raise_or_return("delete_groups", results, raise_errors)  # type: ignore[return-value]


def _hint(code: int) -> str:
    if code == ErrorCode.non_empty_group:
        return "the group still has members: stop its consumers first"
    if code == ErrorCode.group_id_not_found:
        return "no such group"
    return ""


# --- offsets ------------------------------------------------------------------------------

async def list_group_offsets(admin: AdminClient, group_id: str,
                             partitions: Iterable[TopicPartition] | None,
                             require_stable: bool = False,
                             ) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Committed offsets: all of them (partitions=None), or of the given partitions (None
    where nothing is committed). ``require_stable`` (OffsetFetch v7+): partitions with
    offsets of an open transaction answer UNSTABLE_OFFSET_COMMIT, retried until the
    transaction ends or default.api.timeout.ms."""
    wanted = None if partitions is None else sorted({TopicPartition(*tp) for tp in partitions})
    cluster = admin.cluster

    async def call(node: int, _groups: list[str], _found: Any) -> dict[str, Any]:
        conn = await cluster.connection(node)
        topics = {tp.topic for tp in wanted or ()}
        ids = {t: cluster.topic_id(t) for t in topics}
        version = pick_version(conn, ApiKey.OFFSET_FETCH, topics, ids)
        response = await conn.request(ApiKey.OFFSET_FETCH, fetch_body(
            group_id, wanted, ids, require_stable=require_stable), version=version)
        group_error, values = fetch_result(response, version, cluster.topic_names)
        if group_error:
            return {group_id: group_error}
        for tp, value in values.items():
            if isinstance(value, int):
                if ErrorCode(value).retriable:
                    return {group_id: value}
                raise AdminError("list_group_offsets", {
                    tp: BrokerError(value, context=f"offsets of {tp} in group {group_id!r}")})
        return {group_id: values}

    raw = (await _for_each_coordinator(admin, "OffsetFetch", [group_id], call))[group_id]
    if isinstance(raw, int):
        raise AdminError("list_group_offsets", {
            group_id: BrokerError(raw, context=f"offsets of group {group_id!r}")})
    if wanted is None:
        return {tp: v for tp, v in sorted(raw.items()) if v is not None}
    return {tp: raw.get(tp) for tp in wanted}


async def alter_group_offsets(
    admin: AdminClient, group_id: str,
    offsets: Mapping[TopicPartition, int | OffsetAndMetadata], raise_errors: bool,
) -> dict[TopicPartition, BrokerError | None]:
    """Set committed offsets of a group without members (generation -1, member "")."""
    wanted = {TopicPartition(*tp): as_offset(v) for tp, v in offsets.items()}
    cluster = admin.cluster
    if not wanted:
        return {}

    async def call(node: int, _groups: list[str], _found: Any) -> dict[str, Any]:
        conn = await cluster.connection(node)
        topics = {tp.topic for tp in wanted}
        ids = {t: cluster.topic_id(t) for t in topics}
        version = pick_version(conn, ApiKey.OFFSET_COMMIT, topics, ids)
        response = await conn.request(
            ApiKey.OFFSET_COMMIT, commit_body(group_id, -1, "", None, wanted, ids),
            version=version)
        codes = commit_errors(response, cluster.topic_names)
        retry = [c for c in codes.values() if c in COORDINATOR_ERRORS]
        return {group_id: retry[0] if retry else codes}

    codes = (await _for_each_coordinator(admin, "OffsetCommit", [group_id], call))[group_id]
    results: dict[TopicPartition, BrokerError | None] = {}
    for tp in wanted:
        code = codes.get(tp, ErrorCode.unknown_server_error)
        if code in _NOT_EMPTY:
            results[tp] = BrokerError(
                code, f"group {group_id!r} has active members: offsets can only be altered "
                "while the group is empty (stop its consumers first)",
                f"alter offset of {tp}")
        else:
            results[tp] = BrokerError(code, context=f"alter offset of {tp}") if code else None
    return _raise_or_return("alter_group_offsets", results,  # type: ignore[return-value]
                            raise_errors)


async def delete_group_offsets(admin: AdminClient, group_id: str,
                               partitions: Iterable[TopicPartition], raise_errors: bool
                               ) -> dict[TopicPartition, BrokerError | None]:
    """OffsetDelete: forget committed offsets of partitions the group does not read."""
    wanted = sorted({TopicPartition(*tp) for tp in partitions})
    topics: dict[str, list[int]] = {}
    for tp in wanted:
        topics.setdefault(tp.topic, []).append(tp.partition)

    async def call(node: int, _groups: list[str], _found: Any) -> dict[str, Any]:
        response = await admin.cluster.request(node, ApiKey.OFFSET_DELETE,
                                               requests.offset_delete(group_id, topics))
        if response.error_code:
            return {group_id: int(response.error_code)}
        return {group_id: {TopicPartition(t.name, p.partition_index): int(p.error_code)
                           for t in response.topics for p in t.partitions}}

    raw = (await _for_each_coordinator(admin, "OffsetDelete", [group_id], call))[group_id]
    if isinstance(raw, int):
        error = BrokerError(raw, _hint(raw), f"delete offsets of group {group_id!r}")
        results: dict[TopicPartition, BrokerError | None] = {tp: error for tp in wanted}
    else:
        results = {}
        for tp in wanted:
            code = raw.get(tp, ErrorCode.unknown_server_error)
            hint = ("a member of the group still subscribes to this topic"
                    if code == ErrorCode.group_subscribed_to_topic else "")
            results[tp] = BrokerError(code, hint, f"delete offset of {tp}") if code else None
    return _raise_or_return("delete_group_offsets", results,  # type: ignore[return-value]
                            raise_errors)


async def describe_group_lag(admin: AdminClient, group_id: str) -> list[PartitionLag]:
    """Per partition the group reads or has committed: committed offset, log end offset
    (high watermark), lag, and the member reading it."""
    description = (await describe_groups(admin, [group_id], True))[group_id]
    assert isinstance(description, GroupDescription)
    committed = await list_group_offsets(admin, group_id, None)
    readers: dict[TopicPartition, MemberDescription] = {
        tp: m for m in description.members for tp in m.assignment
    }
    partitions = sorted(set(committed) | set(readers))
    ends: dict[TopicPartition, Any] = {}
    if partitions:
        ends = await list_offsets(admin.cluster, {tp: -1 for tp in partitions},
                                  isolation_level=0, timeout_ms=admin._timeout_ms)
    rows = []
    for tp in partitions:
        end = ends.get(tp)
        log_end = end[0] if isinstance(end, tuple) else -1
        value = committed.get(tp)
        lag = max(0, log_end - value.offset) if value is not None and log_end >= 0 else None
        member = readers.get(tp)
        rows.append(PartitionLag(
            tp.topic, tp.partition, value.offset if value is not None else None, log_end, lag,
            member.member_id if member else "", member.group_instance_id if member else None,
            member.client_id if member else "", member.host if member else "",
            value.metadata if value is not None else "",
        ))
    return rows
