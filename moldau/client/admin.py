"""AdminClient: topics, partitions, configs, records, cluster, offsets.

Each call retries retriable errors (refreshing metadata, e.g. after NOT_CONTROLLER) up to
``default.api.timeout.ms``. Calls that act on many items return ``{item: error or None}``
when ``raise_errors=False``; by default any failed item raises :class:`AdminError` listing
every failure.

Consumer-group administration (list/describe/delete groups, committed offsets, lag) lives
in :mod:`moldau.client.group.admin_ops` (methods: :class:`.admin_groups.GroupAdmin`);
transactions in :class:`.admin_txn.TransactionAdmin`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .admin_groups import GroupAdmin
from .admin_txn import TransactionAdmin
from .admin_types import (
    AdminError,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ListOffsetsResult,
    LogDirDescription,
    NewTopic,
    PartitionReassignment,
    ReplicaLogInfo,
    ResourceType,
)
from .cluster import Cluster
from .config import parse_config
from .errors import BrokerError
from .leaders import for_each_leader, list_offsets
from .retry import call_with_retries
from .types import BrokerInfo, ClusterInfo, TopicInfo, TopicPartition

# Errors of controller-bound requests that mean "ask again, maybe elsewhere".
_RETRY_CONTROLLER = frozenset({ErrorCode.not_controller, ErrorCode.request_timed_out})


class AdminClient(GroupAdmin, TransactionAdmin):
    """Administrative operations on a Kafka-compatible cluster.

    ``config`` takes the common keys (``bootstrap.servers``, ``client.id``,
    ``broker.address.map``, ``request.timeout.ms``, ...) and ``default.api.timeout.ms``.
    Use as ``async with AdminClient({...}) as admin:`` or call ``start()``/``close()``.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = parse_config("admin", config)
        self.cluster = Cluster(self.config)
        self._timeout_ms: int = self.config["default.api.timeout.ms"]

    async def start(self) -> AdminClient:
        await self.cluster.start()
        return self

    async def close(self) -> None:
        await self.cluster.close()

    async def __aenter__(self) -> AdminClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- helpers --------------------------------------------------------------------------

    async def _retrying(self, what: str, op: Any) -> Any:
        async def refresh(_exc: BaseException) -> None:
            try:
                await self.cluster.refresh()
            except Exception:
                pass

        return await call_with_retries(
            op, timeout_ms=self._timeout_ms, initial_ms=self.config["retry.backoff.ms"],
            max_ms=self.config["retry.backoff.max.ms"], what=what, before_retry=refresh,
        )

    def _controller(self) -> int | None:
        cid = self.cluster.controller_id
        return cid if cid >= 0 and cid in self.cluster.brokers else None

    @staticmethod
    def _collect(
        what: str, results: dict[Any, BrokerError | None], raise_errors: bool
    ) -> dict[Any, BrokerError | None]:
        failed = {k: v for k, v in results.items() if v is not None}
        if failed and raise_errors:
            raise AdminError(what, failed)
        return results

    async def _ask_controller(self, what: str, key: ApiKey, body: dict[str, Any]) -> Any:
        """Send ``body`` to the active controller, again after NOT_CONTROLLER or a time-out
        (:meth:`_retrying`); a top-level error code raises :class:`BrokerError`."""

        async def send() -> Any:
            response = await self.cluster.request(self._controller(), key, body)
            if response.error_code:
                raise BrokerError(response.error_code,
                                  getattr(response, "error_message", None) or "", what)
            return response

        return await self._retrying(what, send)

    async def _per_item(
        self, what: str, send: Any, extract: Any, items: list[Any]
    ) -> dict[Any, BrokerError | None]:
        """Send a controller-bound request, retrying items with retriable errors."""
        results: dict[Any, BrokerError | None] = {}
        pending = list(items)

        async def attempt() -> None:
            nonlocal pending
            response = await send(pending)
            retry: list[Any] = []
            for key, code, message in extract(response):
                if code and ErrorCode(code) in _RETRY_CONTROLLER:
                    retry.append(key)
                    continue
                results[key] = BrokerError(code, message or "", f"{what} {key}") if code else None
            pending = [i for i in pending if _key(i) in retry]
            if pending:
                raise BrokerError(ErrorCode.not_controller, context=f"{what} {retry}")

        await self._retrying(what, attempt)
        return results

    # --- topics ---------------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        raise_errors: bool = True,
    ) -> dict[str, BrokerError | None]:
        """Create topics; ``{name: None}`` on success (TOPIC_ALREADY_EXISTS is an error)."""
        new = list(topics)
        timeout = timeout_ms if timeout_ms is not None else self.config["request.timeout.ms"]

        async def send(items: list[NewTopic]) -> Any:
            return await self.cluster.request(self._controller(), ApiKey.CREATE_TOPICS, {
                "topics": [{
                    "name": t.name,
                    "num_partitions": t.num_partitions if not t.replica_assignment else -1,
                    "replication_factor":
                        t.replication_factor if not t.replica_assignment else -1,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(ids)}
                        for p, ids in sorted((t.replica_assignment or {}).items())
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                } for t in items],
                "timeout": timeout,
                "validate_only": validate_only,
            })

        def extract(r: Any) -> Iterable[tuple[str, int, str | None]]:
            return [(t.name, t.error_code, t.error_message) for t in r.topics]

        results = await self._per_item("CreateTopics", send, extract, new)
        return self._collect("create_topics", results, raise_errors)

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: int | None = None, raise_errors: bool = True
    ) -> dict[str, BrokerError | None]:
        """Delete topics by name."""
        timeout = timeout_ms if timeout_ms is not None else self.config["request.timeout.ms"]

        async def send(items: list[str]) -> Any:
            return await self.cluster.request(self._controller(), ApiKey.DELETE_TOPICS, {
                "topics": [{"name": n, "topic_id": None} for n in items],
                "topic_names": list(items),
                "timeout": timeout,
            })

        def extract(r: Any) -> Iterable[tuple[str, int, str | None]]:
            return [(t.name, t.error_code, getattr(t, "error_message", None))
                    for t in r.responses]

        results = await self._per_item("DeleteTopics", send, extract, list(names))
        return self._collect("delete_topics", results, raise_errors)

    async def list_topics(self, *, include_internal: bool = False) -> dict[str, TopicInfo]:
        """Every topic in the cluster (internal ones such as __consumer_offsets on request)."""
        await self._retrying("list topics", lambda: self.cluster.refresh(all_topics=True))
        return {
            name: info for name, info in sorted(self.cluster.topics.items())
            if include_internal or not info.is_internal
        }

    async def describe_topics(self, names: Iterable[str]) -> dict[str, TopicInfo]:
        """Metadata of the named topics; unknown topics raise AdminError."""
        wanted = list(names)
        self.cluster.add_topics(wanted)
        await self._retrying("describe topics", lambda: self.cluster.refresh())
        missing = {
            n: BrokerError(ErrorCode.unknown_topic_or_partition, context=f"topic {n!r}")
            for n in wanted if n not in self.cluster.topics
        }
        if missing:
            raise AdminError("describe_topics", dict(missing))
        return {n: self.cluster.topics[n] for n in wanted}

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        raise_errors: bool = True,
    ) -> dict[str, BrokerError | None]:
        """Grow topics to the given total partition counts."""
        timeout = timeout_ms if timeout_ms is not None else self.config["request.timeout.ms"]

        async def send(items: list[str]) -> Any:
            return await self.cluster.request(self._controller(), ApiKey.CREATE_PARTITIONS, {
                "topics": [{"name": n, "count": new_totals[n], "assignments": None}
                           for n in items],
                "timeout": timeout,
                "validate_only": validate_only,
            })

        def extract(r: Any) -> Iterable[tuple[str, int, str | None]]:
            return [(t.name, t.error_code, t.error_message) for t in r.results]

        results = await self._per_item("CreatePartitions", send, extract, list(new_totals))
        return self._collect("create_partitions", results, raise_errors)

    # --- configs --------------------------------------------------------------------------

    def _resource_node(self, resource: ConfigResource) -> int | None:
        """Broker resources go to that broker; the rest to any broker."""
        if resource.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and resource.name:
            return int(resource.name)
        return None

    def _by_node(self, resources: Iterable[ConfigResource]) -> dict[int | None, list[Any]]:
        groups: dict[int | None, list[Any]] = {}
        for r in resources:
            r = ConfigResource(ResourceType(r.type), r.name)
            groups.setdefault(self._resource_node(r), []).append(r)
        return groups

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        keys: Iterable[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Config entries of topics and brokers; a failed resource raises AdminError."""
        wanted = list(keys) if keys is not None else None
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        errors: dict[object, BrokerError] = {}
        for node, group in self._by_node(resources).items():
            async def send(node: int | None = node, group: list[Any] = group) -> Any:
                return await self.cluster.request(node, ApiKey.DESCRIBE_CONFIGS, {
                    "resources": [{"resource_type": int(r.type), "resource_name": r.name,
                                   "configuration_keys": wanted} for r in group],
                    "include_synonyms": include_synonyms,
                    "include_documentation": include_documentation,
                })

            response = await self._retrying("DescribeConfigs", send)
            for res in response.results:
                key = ConfigResource(ResourceType(res.resource_type), res.resource_name)
                if res.error_code:
                    errors[key] = BrokerError(res.error_code, res.error_message or "",
                                              f"DescribeConfigs {key.type.name} {key.name}")
                    continue
                entries = {}
                for c in res.configs:
                    source = getattr(c, "config_source", -1)
                    is_default = getattr(c, "is_default", source == 5)
                    entries[c.name] = ConfigEntry(
                        c.name, c.value, source, c.read_only, c.is_sensitive, bool(is_default),
                        tuple((s.name, s.value, s.source) for s in getattr(c, "synonyms", ())),
                        getattr(c, "documentation", None),
                    )
                out[key] = entries
        if errors:
            raise AdminError("describe_configs", errors)
        return out

    async def alter_configs(
        self,
        changes: Mapping[ConfigResource, Mapping[str, str | None]],
        *,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[ConfigResource, BrokerError | None]:
        """Replace the whole dynamic config of each resource (legacy AlterConfigs)."""
        results: dict[ConfigResource, BrokerError | None] = {}
        for node, group in self._by_node(changes).items():
            async def send(node: int | None = node, group: list[Any] = group) -> Any:
                return await self.cluster.request(node, ApiKey.ALTER_CONFIGS, {
                    "resources": [{
                        "resource_type": int(r.type), "resource_name": r.name,
                        "configs": [{"name": k, "value": v} for k, v in changes[r].items()],
                    } for r in group],
                    "validate_only": validate_only,
                })

            response = await self._retrying("AlterConfigs", send)
            results.update(self._config_results("AlterConfigs", response))
        return self._collect("alter_configs", results, raise_errors)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[ConfigResource, BrokerError | None]:
        """Set/delete/append/subtract individual config keys (IncrementalAlterConfigs)."""
        ops = {r: list(v) for r, v in changes.items()}
        results: dict[ConfigResource, BrokerError | None] = {}
        for node, group in self._by_node(ops).items():
            async def send(node: int | None = node, group: list[Any] = group) -> Any:
                return await self.cluster.request(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, {
                    "resources": [{
                        "resource_type": int(r.type), "resource_name": r.name,
                        "configs": [{"name": o.name, "config_operation": int(o.op),
                                     "value": o.value} for o in ops[r]],
                    } for r in group],
                    "validate_only": validate_only,
                })

            response = await self._retrying("IncrementalAlterConfigs", send)
            results.update(self._config_results("IncrementalAlterConfigs", response))
        return self._collect("incremental_alter_configs", results, raise_errors)

    @staticmethod
    def _config_results(what: str, response: Any) -> dict[ConfigResource, BrokerError | None]:
        out: dict[ConfigResource, BrokerError | None] = {}
        for r in response.responses:
            key = ConfigResource(ResourceType(r.resource_type), r.resource_name)
            out[key] = (
                BrokerError(r.error_code, r.error_message or "", f"{what} {key.name}")
                if r.error_code else None
            )
        return out

    # --- records and offsets --------------------------------------------------------------

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, raise_errors: bool = True
    ) -> dict[TopicPartition, int | BrokerError]:
        """Delete records below the given offsets (-1 = high watermark); returns low marks."""
        timeout = self.config["request.timeout.ms"]

        async def call(node: int, batch: dict[TopicPartition, int]) -> dict[TopicPartition, Any]:
            topics: dict[str, list[dict[str, int]]] = {}
            for tp, offset in batch.items():
                topics.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "offset": offset})
            response = await self.cluster.request(node, ApiKey.DELETE_RECORDS, {
                "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                "timeout": timeout,
            })
            out: dict[TopicPartition, Any] = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (BrokerError(p.error_code, context=f"DeleteRecords {tp}")
                               if p.error_code else p.low_watermark)
            return out

        results = await for_each_leader(
            self.cluster, {TopicPartition(*k): v for k, v in before.items()}, call,
            timeout_ms=self._timeout_ms, what="DeleteRecords",
        )
        failed = {k: v for k, v in results.items() if isinstance(v, BrokerError)}
        if failed and raise_errors:
            raise AdminError("delete_records", dict(failed))
        return results

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: str = "read_uncommitted",
        raise_errors: bool = True,
    ) -> dict[TopicPartition, ListOffsetsResult | BrokerError]:
        """Offsets by spec: OffsetSpec.EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3) or a
        timestamp in ms (first offset whose timestamp is >= it; -1 when none)."""
        raw = await list_offsets(
            self.cluster, {TopicPartition(*k): v for k, v in specs.items()},
            isolation_level=1 if isolation_level == "read_committed" else 0,
            timeout_ms=self._timeout_ms,
        )
        out: dict[TopicPartition, ListOffsetsResult | BrokerError] = {
            tp: v if isinstance(v, BrokerError) else ListOffsetsResult(*v)
            for tp, v in raw.items()
        }
        failed = {k: v for k, v in out.items() if isinstance(v, BrokerError)}
        if failed and raise_errors:
            raise AdminError("list_offsets", dict(failed))
        return out

    # --- cluster --------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterInfo:
        """Cluster id, controller and brokers (DescribeCluster, else Metadata)."""
        conn = await self.cluster.any_connection()
        if conn.versions.supports(ApiKey.DESCRIBE_CLUSTER):
            async def send() -> Any:
                return await self.cluster.request(None, ApiKey.DESCRIBE_CLUSTER, {
                    "include_cluster_authorized_operations": False, "endpoint_type": 1,
                    "include_fenced_brokers": False,
                })

            r = await self._retrying("DescribeCluster", send)
            if r.error_code:
                raise BrokerError(r.error_code, r.error_message or "", "DescribeCluster")
            brokers = tuple(
                self.cluster.broker_info(b.broker_id, b.host, b.port, b.rack) for b in r.brokers
            )
            return ClusterInfo(r.cluster_id, r.controller_id, brokers)
        await self._retrying("Metadata", lambda: self.cluster.refresh())
        return ClusterInfo(
            self.cluster.cluster_id, self.cluster.controller_id,
            tuple(self.cluster.brokers.values()),
        )

    async def describe_brokers(self) -> dict[int, BrokerInfo]:
        """Brokers by node id, as the client will connect to them (address map applied)."""
        info = await self.describe_cluster()
        return {b.node_id: b for b in info.brokers}

    async def describe_log_dirs(
        self, brokers: Iterable[int]
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log dirs (DescribeLogDirs for every partition, sent to that broker,
        as Kafka's Admin.describeLogDirs): path -> error, replicas with sizes, disk space."""
        out: dict[int, dict[str, LogDirDescription]] = {}
        for node in sorted(set(brokers)):
            async def send(node: int = node) -> Any:
                response = await self.cluster.request(node, ApiKey.DESCRIBE_LOG_DIRS,
                                                      {"topics": None})
                if getattr(response, "error_code", 0):
                    raise BrokerError(response.error_code, "", f"DescribeLogDirs broker {node}")
                return response

            response = await self._retrying("DescribeLogDirs", send)
            dirs: dict[str, LogDirDescription] = {}
            for result in response.results:
                replicas = {
                    TopicPartition(t.name, p.partition_index): ReplicaLogInfo(
                        int(p.partition_size), int(p.offset_lag), bool(p.is_future_key))
                    for t in result.topics for p in t.partitions}
                error = (BrokerError(result.error_code, "", f"log dir {result.log_dir}")
                         if result.error_code else None)
                dirs[result.log_dir] = LogDirDescription(
                    result.log_dir, error, replicas, int(getattr(result, "total_bytes", -1)),
                    int(getattr(result, "usable_bytes", -1)))
            out[node] = dirs
        return out

    # --- reassignments (KIP-455) -----------------------------------------------------------

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Iterable[int] | None], *,
        raise_errors: bool = True,
    ) -> dict[TopicPartition, BrokerError | None]:
        """Reassign partitions to the given replicas (None cancels the reassignment in
        progress); ``{partition: None}`` for each one the controller accepted."""
        wanted = {tp: None if r is None else list(r) for tp, r in targets.items()}
        response = await self._ask_controller(
            "AlterPartitionReassignments", ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
                "timeout": self.config["request.timeout.ms"], "topics": [
                    {"name": topic, "partitions": [
                        {"partition_index": i, "replicas": wanted[TopicPartition(topic, i)]}
                        for i in indexes]}
                    for topic, indexes in _indexes_by_topic(wanted).items()]})
        results: dict[TopicPartition, BrokerError | None] = {}
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                results[tp] = (BrokerError(p.error_code, p.error_message or "",
                                           f"reassignment of {tp.topic}-{tp.partition}")
                               if p.error_code else None)
        return self._collect("alter_partition_reassignments", results, raise_errors)

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress: of every partition, or of the given ones."""
        topics = None if partitions is None else _indexes_by_topic(partitions)
        response = await self._ask_controller(
            "ListPartitionReassignments", ApiKey.LIST_PARTITION_REASSIGNMENTS, {
                "timeout": self.config["request.timeout.ms"],
                "topics": None if topics is None else [
                    {"name": n, "partition_indexes": ps} for n, ps in topics.items()]})
        return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    async def elect_leaders(
        self, election_type: int, partitions: Iterable[TopicPartition] | None = None, *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, BrokerError | None]:
        """ElectLeaders (PREFERRED 0 / UNCLEAN 1) for ``partitions`` (None: all), sent to the
        controller as Kafka's Admin.electLeaders does: ``{partition: None}`` when elected,
        else its error (ELECTION_NOT_NEEDED included). With None the controller leaves out
        the partitions that needed no election."""
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        timeout = timeout_ms if timeout_ms is not None else self.config["request.timeout.ms"]
        topics = _indexes_by_topic(wanted or ())

        async def send() -> Any:
            response = await self.cluster.request(self._controller(), ApiKey.ELECT_LEADERS, {
                "election_type": election_type, "timeout": timeout,
                "topic_partitions": None if wanted is None else [
                    {"topic": t, "partitions": ps} for t, ps in topics.items()]})
            codes = [getattr(response, "error_code", 0)] + [
                p.error_code for r in response.replica_election_results
                for p in r.partition_result]
            retry = next((c for c in codes if c and ErrorCode(c) in _RETRY_CONTROLLER), None)
            if retry is not None:
                raise BrokerError(retry, context="ElectLeaders")
            if codes[0]:
                raise BrokerError(codes[0], context="ElectLeaders")
            return response

        response = await self._retrying("ElectLeaders", send)
        return {TopicPartition(r.topic, p.partition_id):
                BrokerError(p.error_code, p.error_message or "") if p.error_code else None
                for r in response.replica_election_results for p in r.partition_result}


def _key(item: Any) -> str:
    return item.name if isinstance(item, NewTopic) else str(item)


def _indexes_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition indexes by topic name, in the order given (request bodies group by topic)."""
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out
