"""API v3 clusters, brokers, topics and partitions over HTTP against an in-process broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.testing.runner import InProcessBroker

from .v3_harness import JSON, Reply, RestV3, unique


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


@pytest.fixture(scope="module")
def rest(broker: InProcessBroker) -> Iterator[RestV3]:
    with RestV3(broker.bootstrap) as server:
        yield server


@pytest.fixture(scope="module")
def cid(rest: RestV3) -> str:
    return rest.cluster_id


def ok(reply: Reply, status: int = 200) -> dict:
    assert reply.status == status, reply.text
    assert reply.content_type == JSON
    return reply.json  # type: ignore[no-any-return]


def error(reply: Reply, status: int, code: int) -> str:
    assert (reply.status, reply.json.get("error_code")) == (status, code), reply.text
    assert set(reply.json) == {"error_code", "message"} and reply.content_type == JSON
    return str(reply.json["message"])


def create(rest: RestV3, cid: str, name: str, **fields: object) -> Reply:
    return rest.request("POST", f"/v3/clusters/{cid}/topics", {"topic_name": name, **fields})


def test_clusters(rest: RestV3, cid: str) -> None:
    base = f"{rest.url}/v3/clusters/{cid}"
    listed = ok(rest.request("GET", "/v3/clusters"))
    assert listed["kind"] == "KafkaClusterList"
    assert listed["metadata"] == {"self": f"{rest.url}/v3/clusters", "next": None}
    cluster = ok(rest.request("GET", f"/v3/clusters/{cid}"))
    assert listed["data"] == [cluster]
    assert cluster == {
        "kind": "KafkaCluster",
        "metadata": {"self": base, "resource_name": f"crn:///kafka={cid}"},
        "cluster_id": cid,
        "controller": {"related": f"{base}/brokers/1"},
        "acls": {"related": f"{base}/acls"},
        "brokers": {"related": f"{base}/brokers"},
        "broker_configs": {"related": f"{base}/broker-configs"},
        "consumer_groups": {"related": f"{base}/consumer-groups"},
        "topics": {"related": f"{base}/topics"},
        "partition_reassignments": {"related": f"{base}/topics/-/partitions/-/reassignment"},
    }
    # trailing slashes are accepted
    assert ok(rest.request("GET", f"/v3/clusters/{cid}/")) == cluster
    assert error(rest.request("GET", "/v3/clusters/nope"), 404, 404) == (
        "Cluster nope cannot be found.")
    error(rest.request("GET", "/v3/clusters/nope/topics"), 404, 404)


def test_brokers(rest: RestV3, broker: InProcessBroker, cid: str) -> None:
    base = f"{rest.url}/v3/clusters/{cid}"
    listed = ok(rest.request("GET", f"/v3/clusters/{cid}/brokers"))
    assert listed["kind"] == "KafkaBrokerList" and len(listed["data"]) == 1
    one = ok(rest.request("GET", f"/v3/clusters/{cid}/brokers/1"))
    assert listed["data"] == [one]
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    assert one == {
        "kind": "KafkaBroker",
        "metadata": {"self": f"{base}/brokers/1", "resource_name": f"crn:///kafka={cid}/broker=1"},
        "cluster_id": cid, "broker_id": 1, "host": "127.0.0.1", "port": port, "rack": None,
        "configs": {"related": f"{base}/brokers/1/configs"},
        "partition_replicas": {"related": f"{base}/brokers/1/partition-replicas"},
    }
    error(rest.request("GET", f"/v3/clusters/{cid}/brokers/7"), 404, 404)
    error(rest.request("GET", f"/v3/clusters/{cid}/brokers/x"), 404, 404)
    name = unique()
    ok(create(rest, cid, name, partitions_count=2), 201)
    replicas = ok(rest.request("GET", f"/v3/clusters/{cid}/brokers/1/partition-replicas"))
    mine = [r for r in replicas["data"] if r["topic_name"] == name]
    assert [(r["partition_id"], r["broker_id"], r["is_leader"], r["is_in_sync"])
            for r in mine] == [(0, 1, True, True), (1, 1, True, True)]


def test_create_get_list_delete_topic(rest: RestV3, cid: str) -> None:
    name = unique()
    base = f"{rest.url}/v3/clusters/{cid}/topics/{name}"
    reply = create(rest, cid, name, partitions_count=3, replication_factor=1,
                   configs=[{"name": "cleanup.policy", "value": "compact"}])
    created = ok(reply, 201)
    assert reply.headers["Location"] == base
    assert created == {
        "kind": "KafkaTopic",
        "metadata": {"self": base, "resource_name": f"crn:///kafka={cid}/topic={name}"},
        "cluster_id": cid, "topic_name": name, "is_internal": False,
        "replication_factor": 1, "partitions_count": 3,
        "partitions": {"related": f"{base}/partitions"},
        "configs": {"related": f"{base}/configs"},
        "partition_reassignments": {"related": f"{base}/partitions/-/reassignment"},
    }
    assert ok(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}")) == created
    listed = ok(rest.request("GET", f"/v3/clusters/{cid}/topics"))
    names = [t["topic_name"] for t in listed["data"]]
    assert name in names and names == sorted(names) and "__consumer_offsets" not in names
    assert listed["kind"] == "KafkaTopicList"
    policy = ok(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}/configs/cleanup.policy"))
    assert (policy["value"], policy["source"]) == ("compact", "DYNAMIC_TOPIC_CONFIG")
    # already there: 400 / 40002 with Kafka's message
    assert "already exists" in error(create(rest, cid, name), 400, 40002)
    reply = rest.request("DELETE", f"/v3/clusters/{cid}/topics/{name}")
    assert (reply.status, reply.text) == (204, "")
    error(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}"), 404, 40403)
    error(rest.request("DELETE", f"/v3/clusters/{cid}/topics/{name}"), 404, 40403)


def test_create_with_defaults_and_assignment(rest: RestV3, cid: str) -> None:
    plain = unique()
    created = ok(create(rest, cid, plain), 201)
    assert (created["partitions_count"], created["replication_factor"]) == (1, 1)
    assigned = unique()
    created = ok(create(rest, cid, assigned, replicas_assignments=[
        {"partition_id": 0, "broker_ids": [1]}, {"partition_id": 1, "broker_ids": [1]}]), 201)
    assert (created["partitions_count"], created["replication_factor"]) == (2, 1)


def test_validate_only_creates_nothing(rest: RestV3, cid: str) -> None:
    name = unique()
    reply = create(rest, cid, name, partitions_count=4, validate_only=True)
    data = ok(reply, 200)
    assert (data["topic_name"], data["partitions_count"]) == (name, 4)
    assert data["replication_factor"] == 1  # the broker's default.replication.factor
    error(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}"), 404, 40403)
    # validation still happens
    assert error(create(rest, cid, name, replication_factor=3, validate_only=True),
                 400, 40002)
    error(create(rest, cid, name, partitions_count=0, validate_only=True), 400, 40002)
    error(create(rest, cid, name, configs=[{"name": "cleanup.policy", "value": "sideways"}],
                 validate_only=True), 400, 40002)
    error(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}"), 404, 40403)


def test_create_bad_requests(rest: RestV3, cid: str) -> None:
    path = f"/v3/clusters/{cid}/topics"
    error(rest.request("POST", path, {"partitions_count": 1}), 400, 400)
    assert "partitions_count" in error(
        create(rest, cid, unique(), partitions_count="many"), 400, 400)
    error(create(rest, cid, "bad name!"), 400, 40002)
    error(rest.request("POST", path, raw=b"{not json", headers={"Content-Type": JSON}),
          400, 400)
    error(rest.request("POST", path, raw=b"", headers={"Content-Type": JSON}), 400, 400)
    error(rest.request("POST", path, raw=b'{"topic_name":"x"}',
                       headers={"Content-Type": "text/plain"}), 415, 415)
    for hostile in (b'{"topic_name":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                    b'{"topic_name": "x", "partitions_count": ' + b"9" * 5000 + b"}"):
        error(rest.request("POST", path, raw=hostile, headers={"Content-Type": JSON}),
              400, 400)
    # a number given as text is read as Jackson reads it
    ok(create(rest, cid, unique(), partitions_count="2"), 201)


def test_patch_partitions_count(rest: RestV3, cid: str) -> None:
    name = unique()
    ok(create(rest, cid, name, partitions_count=1), 201)
    path = f"/v3/clusters/{cid}/topics/{name}"
    grown = ok(rest.request("PATCH", path, {"partitions_count": 4}))
    assert grown["partitions_count"] == 4
    assert len(ok(rest.request("GET", path + "/partitions"))["data"]) == 4
    error(rest.request("PATCH", path, {"partitions_count": 2}), 400, 40002)
    error(rest.request("PATCH", path, raw=b"", headers={"Content-Type": JSON}), 400, 400)
    error(rest.request("PATCH", f"/v3/clusters/{cid}/topics/{unique()}",
                       {"partitions_count": 2}), 404, 40403)


def test_partitions_and_replicas(rest: RestV3, cid: str) -> None:
    name = unique()
    ok(create(rest, cid, name, partitions_count=2), 201)
    base = f"{rest.url}/v3/clusters/{cid}/topics/{name}/partitions"
    listed = ok(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}/partitions"))
    assert listed["kind"] == "KafkaPartitionList"
    assert listed["metadata"]["self"] == base
    one = ok(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}/partitions/1"))
    assert listed["data"][1] == one
    assert one == {
        "kind": "KafkaPartition",
        "metadata": {"self": f"{base}/1",
                     "resource_name": f"crn:///kafka={cid}/topic={name}/partition=1"},
        "cluster_id": cid, "topic_name": name, "partition_id": 1,
        "leader": {"related": f"{base}/1/replicas/1"},
        "replicas": {"related": f"{base}/1/replicas"},
        "reassignment": {"related": f"{base}/1/reassignment"},
    }
    replicas = ok(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}/partitions/1/replicas"))
    replica = ok(rest.request("GET",
                              f"/v3/clusters/{cid}/topics/{name}/partitions/1/replicas/1"))
    assert replicas["data"] == [replica]
    assert (replica["kind"], replica["broker_id"], replica["is_leader"],
            replica["is_in_sync"]) == ("KafkaReplica", 1, True, True)
    assert replica["broker"] == {"related": f"{rest.url}/v3/clusters/{cid}/brokers/1"}
    error(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}/partitions/5"), 404, 404)
    error(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}/partitions/1/replicas/3"),
          404, 404)
    error(rest.request("GET", f"/v3/clusters/{cid}/topics/{unique()}/partitions"), 404, 40403)
    # nothing is being reassigned
    for path in ("/topics/-/partitions/-/reassignment",
                 f"/topics/{name}/partitions/-/reassignment"):
        moving = ok(rest.request("GET", f"/v3/clusters/{cid}{path}"))
        assert (moving["kind"], moving["data"]) == ("KafkaReassignmentList", [])
    error(rest.request("GET", f"/v3/clusters/{cid}/topics/{name}/partitions/0/reassignment"),
          404, 404)


def test_unknown_routes_and_methods(rest: RestV3, cid: str) -> None:
    assert rest.request("GET", f"/v3/clusters/{cid}/nothing-here").status == 404
    assert rest.request("PUT", f"/v3/clusters/{cid}/topics").status == 405


def test_advertised_base_url(broker: InProcessBroker) -> None:
    with RestV3(broker.bootstrap, base_url="http://proxy.example:8082/") as server:
        cid = server.cluster_id
        cluster = ok(server.request("GET", f"/v3/clusters/{cid}"))
        assert cluster["metadata"]["self"] == f"http://proxy.example:8082/v3/clusters/{cid}"
