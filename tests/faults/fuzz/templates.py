"""Plausible request bodies for every API served, as plain data with the fields of every
version (``build`` keeps what a version has): the fuzz corpus's seeds for APIs that no client
sent at any version while :mod:`.capture` recorded real traffic."""

from __future__ import annotations

from typing import Any

from moldau.protocol.api_keys import ApiKey

from .corpus import FREE_TOPICS, GROUPS

_TOPIC_ID = "5f1b6d1c-3b8e-4f4e-9a3c-2d7c1e9b0a11"
# Plausible bodies for every API served, as plain data with the fields of every version
# (``build`` keeps what a version has). Used when no client sent the API at any version.
TEMPLATES: dict[int, dict[str, Any]] = {
    ApiKey.PRODUCE: {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": "fuzz-b",
         "partition_data": [{"index": 0, "records": None}]}]},
    ApiKey.FETCH: {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 1 << 20,
                   "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                   "topics": [{"topic": "fuzz-a", "topic_id": _TOPIC_ID, "partitions": [
                       {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                        "last_fetched_epoch": -1, "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20}]}],
                   "forgotten_topics_data": [], "rack_id": ""},
    ApiKey.LIST_OFFSETS: {"replica_id": -1, "isolation_level": 0, "timeout": 5000,
                          "topics": [{"name": "fuzz-a", "partitions": [
                              {"partition_index": 0, "current_leader_epoch": -1,
                               "timestamp": -1}]}]},
    ApiKey.METADATA: {"topics": [{"name": "fuzz-a", "topic_id": None}],
                      "allow_auto_topic_creation": True,
                      "include_cluster_authorized_operations": False,
                      "include_topic_authorized_operations": False},
    ApiKey.OFFSET_COMMIT: {"group_id": GROUPS[0], "generation_id_or_member_epoch": -1,
                           "member_id": "", "group_instance_id": None, "retention_time": -1,
                           "topics": [{"name": "fuzz-a", "partitions": [
                               {"partition_index": 0, "committed_offset": 1,
                                "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
    ApiKey.OFFSET_FETCH: {"group_id": GROUPS[0], "topics": [
        {"name": "fuzz-a", "partition_indexes": [0, 1]}], "require_stable": False,
        "groups": [{"group_id": GROUPS[0], "member_id": None, "member_epoch": -1,
                    "topics": [{"name": "fuzz-a", "partition_indexes": [0]}]}]},
    ApiKey.FIND_COORDINATOR: {"key": GROUPS[0], "key_type": 0, "coordinator_keys": [GROUPS[0]]},
    ApiKey.JOIN_GROUP: {"group_id": GROUPS[1], "session_timeout": 6000,
                        "rebalance_timeout": 1000, "member_id": "",
                        "group_instance_id": None, "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01"
                                       b"\x00\x06fuzz-a\xff\xff\xff\xff"}]},
    ApiKey.HEARTBEAT: {"group_id": GROUPS[1], "generation_id": 1, "member_id": "m-1",
                       "group_instance_id": None},
    ApiKey.LEAVE_GROUP: {"group_id": GROUPS[1], "member_id": "m-1",
                         "members": [{"member_id": "m-1", "group_instance_id": None,
                                      "reason": "bye"}]},
    ApiKey.SYNC_GROUP: {"group_id": GROUPS[1], "generation_id": 1, "member_id": "m-1",
                        "group_instance_id": None, "protocol_type": "consumer",
                        "protocol_name": "range",
                        "assignments": [{"member_id": "m-1", "assignment": b""}]},
    ApiKey.DESCRIBE_GROUPS: {"groups": list(GROUPS), "include_authorized_operations": False},
    ApiKey.LIST_GROUPS: {"states_filter": [], "types_filter": []},
    ApiKey.API_VERSIONS: {"client_software_name": "fuzz", "client_software_version": "1.0"},
    ApiKey.CREATE_TOPICS: {"topics": [{"name": FREE_TOPICS[0], "num_partitions": 2,
                                       "replication_factor": 1, "assignments": [],
                                       "configs": [{"name": "retention.ms",
                                                    "value": "3600000"}]}],
                           "timeout": 5000, "validate_only": False},
    ApiKey.DELETE_TOPICS: {"topic_names": [FREE_TOPICS[0]],
                           "topics": [{"name": FREE_TOPICS[0], "topic_id": _TOPIC_ID}],
                           "timeout": 5000},
    ApiKey.DELETE_RECORDS: {"topics": [{"name": "fuzz-b", "partitions": [
        {"partition_index": 0, "offset": 1}]}], "timeout": 5000},
    ApiKey.INIT_PRODUCER_ID: {"transactional_id": None, "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1},
    ApiKey.DESCRIBE_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": "fuzz-a",
                                             "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": True},
    ApiKey.ALTER_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": FREE_TOPICS[0],
                                          "configs": [{"name": "retention.ms",
                                                       "value": "7200000"}]}],
                           "validate_only": False},
    ApiKey.CREATE_PARTITIONS: {"topics": [{"name": FREE_TOPICS[0], "count": 3,
                                           "assignments": None}],
                               "timeout": 5000, "validate_only": False},
    ApiKey.DELETE_GROUPS: {"groups_names": [GROUPS[1]]},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {"resources": [
        {"resource_type": 2, "resource_name": FREE_TOPICS[0],
         "configs": [{"name": "retention.ms", "config_operation": 0, "value": "100000"}]}],
        "validate_only": False},
    ApiKey.OFFSET_DELETE: {"group_id": GROUPS[0], "topics": [
        {"name": "fuzz-b", "partitions": [{"partition_index": 0}]}]},
    ApiKey.DESCRIBE_CLUSTER: {"include_cluster_authorized_operations": False,
                              "endpoint_type": 1, "include_fenced_brokers": False},
    ApiKey.CONSUMER_GROUP_HEARTBEAT: {
        "group_id": GROUPS[2], "member_id": "fuzz-member-848", "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 5000,
        "subscribed_topic_names": ["fuzz-a"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []},
    ApiKey.CONSUMER_GROUP_DESCRIBE: {"group_ids": [GROUPS[2]],
                                     "include_authorized_operations": False},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {"replica_id": -1, "topics": [
        {"topic": "fuzz-a", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
            {"partition": 1, "current_leader_epoch": 0, "leader_epoch": 0}]}]},
    ApiKey.ADD_PARTITIONS_TO_TXN: {
        "v3_and_below_transactional_id": "fuzz-txn", "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "fuzz-a", "partitions": [0, 1]}],
        "transactions": [{"transactional_id": "fuzz-txn", "producer_id": 1, "producer_epoch": 0,
                          "verify_only": True,
                          "topics": [{"name": "fuzz-a", "partitions": [0]}]}]},
    ApiKey.ADD_OFFSETS_TO_TXN: {"transactional_id": "fuzz-txn", "producer_id": 1,
                                "producer_epoch": 0, "group_id": GROUPS[0]},
    ApiKey.END_TXN: {"transactional_id": "fuzz-txn", "producer_id": 1, "producer_epoch": 0,
                     "committed": False},
    ApiKey.WRITE_TXN_MARKERS: {"markers": [
        {"producer_id": 1, "producer_epoch": 0, "transaction_result": False,
         "topics": [{"name": "fuzz-b", "partition_indexes": [0]}], "coordinator_epoch": 0,
         "transaction_version": 0}]},
    ApiKey.DESCRIBE_TRANSACTIONS: {"transactional_ids": ["fuzz-txn"]},
    ApiKey.LIST_TRANSACTIONS: {"state_filters": [], "producer_id_filters": [],
                               "duration_filter": -1, "transactional_id_pattern": None},
    ApiKey.TXN_OFFSET_COMMIT: {"transactional_id": "fuzz-txn", "group_id": GROUPS[0],
                               "producer_id": 1, "producer_epoch": 0, "generation_id": -1,
                               "member_id": "", "group_instance_id": None, "topics": [
                                   {"name": "fuzz-a", "partitions": [
                                       {"partition_index": 0, "committed_offset": 1,
                                        "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]}]},
    ApiKey.DESCRIBE_PRODUCERS: {"topics": [{"name": "fuzz-a", "partition_indexes": [0, 1]}]},
    # Named partitions of one topic (null topics, every partition, comes from mutation).
    ApiKey.DESCRIBE_LOG_DIRS: {"topics": [{"topic": "fuzz-a", "partitions": [0, 1]}]},
    # A broker asking the controller for a block of producer ids (the fuzz broker is node 1).
    ApiKey.ALLOCATE_PRODUCER_IDS: {"broker_id": 1, "broker_epoch": -1},
    # A leader asking the controller for an ISR change (an unknown topic id; v2 reads
    # new_isr, v3 new_isr_with_epochs).
    ApiKey.ALTER_PARTITION: {"broker_id": 1, "broker_epoch": -1, "topics": [
        {"topic_id": "5c6e3a34-0d5c-4f4b-9c67-9a1f5e2b7d10", "partitions": [
            {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0,
             "leader_recovery_state": 0, "new_isr": [1],
             "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": -1}]}]}]},
    # A preferred election of named partitions (null, every partition, comes from mutation;
    # v0 has no election_type).
    ApiKey.ELECT_LEADERS: {"election_type": 0, "timeout": 5000, "topic_partitions": [
        {"topic": "fuzz-a", "partitions": [0, 1]}]},
    # A move of one partition to the fuzz broker (a single node: nothing to copy) and the
    # cancel of another (null replicas).
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: {
        "timeout": 5000, "allow_replication_factor_change": True, "topics": [
            {"name": "fuzz-a", "partitions": [{"partition_index": 0, "replicas": [1]},
                                              {"partition_index": 1, "replicas": None}]}]},
    ApiKey.LIST_PARTITION_REASSIGNMENTS: {"timeout": 5000, "topics": [
        {"name": "fuzz-a", "partition_indexes": [0, 1]}]},
}
