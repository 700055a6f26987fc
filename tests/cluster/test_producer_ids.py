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

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.integration.broker_wire import Wire

from .conftest import ClusterFactory
from .test_producer_failover import init_producer_id, port_of

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
