"""A transactional writer in its own process, driven step by step over stdin/stdout.

    python -m tests.compat.txn_proc CLIENT BOOTSTRAP

CLIENT is confluent_kafka, kafka_python, aiokafka or moldau. Each stdin line is a JSON step
``{"op": ..., "p": producer name, ...}``; each answer is one JSON line: ``{"ok": true}`` or
``{"ok": false, "error": type name, "code": Kafka error name, "fenced": bool, "fatal":
bool | null, "detail": text}``. Ops: init (creates producer ``p`` with ``tid`` and
``timeout_ms``, then init_transactions), begin, send (topic, partition, key, value),
flush, commit, abort, offsets (group, topic, partition, offset), close. The process is its
own, so a test can kill -9 it in the middle of a transaction (tests/compat/js/txn.js does
the same for kafkajs).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

FENCED_CODES = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED")


class Writer:
    """One client's transactional producers by name."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.producers: dict[str, Any] = {}

    def apply(self, step: dict[str, Any]) -> None:
        getattr(self, "op_" + step["op"])(step)

    def classify(self, exc: BaseException) -> dict[str, Any]:
        code = getattr(exc, "errno_name", None) or type(exc).__name__
        return {"code": code, "fenced": code in FENCED_CODES, "fatal": None}


class Confluent(Writer):
    def op_init(self, s: dict[str, Any]) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": s["tid"],
                      "transaction.timeout.ms": s.get("timeout_ms", 60000), "linger.ms": 0})
        self.producers[s["p"]] = p
        p.init_transactions(30)

    def op_begin(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].begin_transaction()

    def op_send(self, s: dict[str, Any]) -> None:
        p = self.producers[s["p"]]
        p.produce(s["topic"], s["value"].encode(), s["key"].encode(), partition=s["partition"])
        p.poll(0)

    def op_flush(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].flush(30)

    def op_commit(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].commit_transaction(30)

    def op_abort(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].abort_transaction(30)

    def op_offsets(self, s: dict[str, Any]) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": s["group"]})
        try:
            self.producers[s["p"]].send_offsets_to_transaction(
                [TopicPartition(s["topic"], s["partition"], s["offset"])],
                c.consumer_group_metadata(), 30)
        finally:
            c.close()

    def op_close(self, s: dict[str, Any]) -> None:
        self.producers.pop(s["p"]).flush(5)

    def classify(self, exc: BaseException) -> dict[str, Any]:
        from confluent_kafka import KafkaException

        if isinstance(exc, KafkaException):
            err = exc.args[0]
            return {"code": err.name(), "fenced": err.name() in FENCED_CODES,
                    "fatal": bool(err.fatal())}
        return super().classify(exc)


class KafkaPython(Writer):
    def op_init(self, s: dict[str, Any]) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=s["tid"],
                          transaction_timeout_ms=s.get("timeout_ms", 60000))
        self.producers[s["p"]] = p
        p.init_transactions()

    def op_begin(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].begin_transaction()

    def op_send(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].send(s["topic"], s["value"].encode(), s["key"].encode(),
                                    partition=s["partition"])

    def op_flush(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].flush(30)

    def op_commit(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].commit_transaction()

    def op_abort(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].abort_transaction()

    def op_offsets(self, s: dict[str, Any]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self.producers[s["p"]].send_offsets_to_transaction(
            {TopicPartition(s["topic"], s["partition"]): OffsetAndMetadata(s["offset"], "", -1)},
            s["group"])

    def op_close(self, s: dict[str, Any]) -> None:
        self.producers.pop(s["p"]).close(5)

    def classify(self, exc: BaseException) -> dict[str, Any]:
        from kafka.errors import InvalidProducerEpochError, ProducerFencedError

        # Once fenced, every transactional call raises KafkaError("... in an error state:
        # [Error 90] ProducerFencedError").
        fenced = isinstance(exc, ProducerFencedError | InvalidProducerEpochError) or (
            "[Error 90] ProducerFencedError" in str(exc))
        return {"code": type(exc).__name__, "fenced": fenced, "fatal": None}


class AioKafka(Writer):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.loop = asyncio.new_event_loop()

    def apply(self, step: dict[str, Any]) -> None:
        self.loop.run_until_complete(getattr(self, "op_" + step["op"])(step))

    async def op_init(self, s: dict[str, Any]) -> None:
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=s["tid"],
                             transaction_timeout_ms=s.get("timeout_ms", 60000))
        self.producers[s["p"]] = p
        await p.start()

    async def op_begin(self, s: dict[str, Any]) -> None:
        await self.producers[s["p"]].begin_transaction()

    async def op_send(self, s: dict[str, Any]) -> None:
        await self.producers[s["p"]].send(s["topic"], s["value"].encode(), s["key"].encode(),
                                          partition=s["partition"])

    async def op_flush(self, s: dict[str, Any]) -> None:
        await self.producers[s["p"]].flush()

    async def op_commit(self, s: dict[str, Any]) -> None:
        await self.producers[s["p"]].commit_transaction()

    async def op_abort(self, s: dict[str, Any]) -> None:
        await self.producers[s["p"]].abort_transaction()

    async def op_offsets(self, s: dict[str, Any]) -> None:
        from aiokafka import TopicPartition

        await self.producers[s["p"]].send_offsets_to_transaction(
            {TopicPartition(s["topic"], s["partition"]): s["offset"]}, s["group"])

    async def op_close(self, s: dict[str, Any]) -> None:
        await self.producers.pop(s["p"]).stop()

    def classify(self, exc: BaseException) -> dict[str, Any]:
        from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

        fenced = isinstance(exc, ProducerFenced | InvalidProducerEpoch)
        return {"code": type(exc).__name__, "fenced": fenced, "fatal": None}


class Moldau(Writer):
    def op_init(self, s: dict[str, Any]) -> None:
        from moldau.client import SyncProducer

        p = SyncProducer({"bootstrap.servers": self.bootstrap, "transactional.id": s["tid"],
                          "transaction.timeout.ms": s.get("timeout_ms", 60000),
                          "linger.ms": 0, "max.block.ms": 30000})
        self.producers[s["p"]] = p
        p.init_transactions()

    def op_begin(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].begin_transaction()

    def op_send(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].send(s["topic"], s["value"], s["key"], partition=s["partition"])

    def op_flush(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].flush(30)

    def op_commit(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].commit_transaction()

    def op_abort(self, s: dict[str, Any]) -> None:
        self.producers[s["p"]].abort_transaction()

    def op_offsets(self, s: dict[str, Any]) -> None:
        from moldau.client import TopicPartition
        from moldau.client.types import ConsumerGroupMetadata

        self.producers[s["p"]].send_offsets_to_transaction(
            {TopicPartition(s["topic"], s["partition"]): s["offset"]},
            ConsumerGroupMetadata(s["group"]))

    def op_close(self, s: dict[str, Any]) -> None:
        self.producers.pop(s["p"]).close()

    def classify(self, exc: BaseException) -> dict[str, Any]:
        from moldau.client.errors import ProducerFenced

        code = getattr(getattr(exc, "code", None), "name", type(exc).__name__)
        return {"code": str(code).upper(), "fenced": isinstance(exc, ProducerFenced),
                "fatal": None}


WRITERS = {"confluent_kafka": Confluent, "kafka_python": KafkaPython, "aiokafka": AioKafka,
           "moldau": Moldau}


def main() -> None:
    writer = WRITERS[sys.argv[1]](sys.argv[2])
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        step = json.loads(line)
        try:
            writer.apply(step)
            answer: dict[str, Any] = {"ok": True}
        except Exception as exc:  # every failure goes back to the test, which judges it
            answer = {"ok": False, "error": type(exc).__name__, "detail": str(exc)[:500],
                      **writer.classify(exc)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
