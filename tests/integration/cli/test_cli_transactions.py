"""``moldau transactions`` against a broker (kafka-transactions.sh's sub-commands).

One transaction is left open by a moldau transactional producer; the tool lists, describes
it and its producer on the partition, does not call it hanging while its coordinator knows it,
and aborts it on the partition by its start offset (WriteTxnMarkers to the leader), after which
the partition has no open transaction and read_committed readers see none of its records.
"""

from __future__ import annotations

import time

from moldau.client import NewTopic, SyncAdminClient, SyncConsumer, SyncProducer, TopicPartition

from .conftest import moldau, unique


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines()]


def test_list_describe_producers_find_hanging_and_abort(bootstrap: str) -> None:
    topic, tid = unique("txn-cli"), unique("txn-cli-id")
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    producer = SyncProducer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                             "linger.ms": 0})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(2):
            producer.send(topic, f"v{i}", f"k{i}", partition=0)
        producer.flush()
        pid = producer._client.producer_id
        epoch = producer._client.producer_epoch

        listed = _rows(moldau("transactions", "-b", bootstrap, "list").ok().stdout)
        assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        assert [tid, "1", str(pid), "Ongoing"] in listed

        described = _rows(moldau("transactions", "-b", bootstrap, "describe",
                                 "--transactional-id", tid).ok().stdout)
        assert described[0][:5] == ["CoordinatorId", "TransactionalId", "ProducerId",
                                    "ProducerEpoch", "TransactionState"]
        row = dict(zip(described[0], described[1], strict=True))
        assert (row["TransactionalId"], row["ProducerId"], row["ProducerEpoch"],
                row["TransactionState"], row["TopicPartitions"]) == (
            tid, str(pid), str(epoch), "Ongoing", f"{topic}-0")
        assert int(row["TransactionDurationMs"]) >= 0

        producers = _rows(moldau("transactions", "-b", bootstrap, "describe-producers",
                                 "--topic", topic, "--partition", "0").ok().stdout)
        row = dict(zip(producers[0], producers[1], strict=True))
        assert (row["ProducerId"], row["ProducerEpoch"], row["LastSequence"],
                row["CurrentTransactionStartOffset"]) == (str(pid), str(epoch), "1", "0")

        hanging = _rows(moldau("transactions", "-b", bootstrap, "find-hanging", "--topic",
                               topic, "--max-transaction-timeout", "1").ok().stdout)
        assert len(hanging) == 1 and hanging[0][0] == "Topic"  # the coordinator knows it

        missing = moldau("transactions", "-b", bootstrap, "abort", "--topic", topic,
                         "--partition", "0", "--start-offset", "99").failed()
        assert "Could not find any open transactions starting at offset 99" in missing.stderr

        moldau("transactions", "-b", bootstrap, "abort", "--topic", topic, "--partition", "0",
               "--start-offset", "0").ok()
        producers = _rows(moldau("transactions", "-b", bootstrap, "describe-producers",
                                 "--topic", topic, "--partition", "0").ok().stdout)
        assert dict(zip(producers[0], producers[1], strict=True))[
            "CurrentTransactionStartOffset"] == "None"
        with SyncConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            deadline = time.monotonic() + 10
            seen = []
            while time.monotonic() < deadline and consumer.position((topic, 0)) < 3:
                seen += consumer.poll(0.2)
            assert seen == [] and consumer.position((topic, 0)) == 3  # 2 records + marker
    finally:
        producer.close()

    unknown = moldau("transactions", "-b", bootstrap, "describe", "--transactional-id",
                     unique("no-such-id")).failed()
    assert "transactional id not found" in unknown.stderr.lower()
