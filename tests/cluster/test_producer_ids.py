"""InitProducerId does not wait on the controller (Kafka 3.5+'s RPCProducerIdManager), on
three real ``moldau serve`` brokers and a real ZooKeeper.

A broker that is not the controller asks it for blocks of 1000 producer ids (AllocateProducerIds
through the forwarding channel). Once 900 of a block are issued it asks for the next one in
the background, so with the controller frozen (SIGSTOP) it goes on issuing ids past the end
of its block. A broker with no block at all answers the retriable COORDINATOR_LOAD_IN_PROGRESS
at once instead of holding the request while the controller does not answer, and issues ids
again once a new controller is elected.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.integration.broker_wire import Wire

from .conftest import ClusterFactory
from .test_producer_failover import create_topic, full_isr, init_producer_id, port_of

BODY = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
        "producer_epoch": -1}


def test_init_producer_id_goes_on_while_the_controller_is_frozen(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    controller = cluster.wait_controller(60)
    issuer, fresh = [b for b in sorted(cluster.brokers) if b != controller]
    ids = []
    with Wire(port_of(cluster, issuer)) as wire:
        ids.append(init_producer_id(port_of(cluster, issuer))[0])
        for _ in range(949):
            answer = wire.call(ApiKey.INIT_PRODUCER_ID, 4, BODY)
            assert answer["error_code"] == ErrorCode.none, answer
            ids.append(answer["producer_id"])
        time.sleep(2)  # the prefetch asked for at the 900th id comes back meanwhile
        cluster.sigstop(controller)
        try:
            started = time.monotonic()
            for _ in range(100):
                answer = wire.call(ApiKey.INIT_PRODUCER_ID, 4, BODY)
                assert answer["error_code"] == ErrorCode.none, answer
                ids.append(answer["producer_id"])
            issued_in = time.monotonic() - started
            # No id needed the frozen controller: the next block was there before.
            assert cluster.controller_id() == controller
            with Wire(port_of(cluster, fresh)) as other:
                asked = time.monotonic()
                answer = other.call(ApiKey.INIT_PRODUCER_ID, 4, BODY)
                answered_in = time.monotonic() - asked
            assert answer["error_code"] == ErrorCode.coordinator_load_in_progress, answer
            # ... and said so while the frozen broker was still the controller, not after
            # the forwarding time-out or the next election.
            assert cluster.controller_id() == controller
            print(f"\n100 ids in {issued_in:.2f} s with the controller frozen; "
                  f"COORDINATOR_LOAD_IN_PROGRESS after {answered_in:.2f} s")
            new = cluster.wait_controller(cluster.session_timeout_s + 30, not_in={controller})
            assert new != controller
            ids.append(init_producer_id(port_of(cluster, fresh))[0])
        finally:
            cluster.sigcont(controller)
    assert len(set(ids)) == len(ids) == 1051
    assert len({i // 1000 for i in ids[:1050]}) == 2, "the issuer crossed into its next block"


def test_an_idempotent_client_retries_until_a_block_is_there(
        cluster_factory: ClusterFactory) -> None:
    """The controller is frozen before any broker has a block: every InitProducerId is
    answered COORDINATOR_LOAD_IN_PROGRESS until another controller is elected, and a
    confluent-kafka idempotent producer retries through it: its record is delivered, and no
    error reaches the application."""
    from confluent_kafka import Producer

    cluster = cluster_factory(3)
    controller = cluster.wait_controller(60)
    others = [b for b in sorted(cluster.brokers) if b != controller]
    topic = f"pids-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[*others, controller]])
    full_isr(cluster, topic)
    cluster.sigstop(controller)
    try:
        with Wire(port_of(cluster, others[0])) as wire:
            answer = wire.call(ApiKey.INIT_PRODUCER_ID, 4, BODY)
        assert answer["error_code"] == ErrorCode.coordinator_load_in_progress, answer
        errors: list[Any] = []
        delivered: list[Any] = []
        producer = Producer({
            "bootstrap.servers": cluster.bootstrap(ids=others), "enable.idempotence": True,
            "acks": "all",
            # transient connection errors (the frozen broker) are not the application's
            "error_cb": lambda err: err.fatal() and errors.append(err)})
        producer.produce(topic, b"after-the-wait", partition=0,
                         on_delivery=lambda err, msg: (errors if err else delivered).append(
                             err or msg.offset()))
        assert producer.flush(cluster.session_timeout_s + 60) == 0
        assert cluster.controller_id() != controller
    finally:
        cluster.sigcont(controller)
    assert delivered and not errors, (delivered, errors)
