"""The live fuzzer's corpus and mutator cover every API the broker serves, the hand-coded
ones included (ControlledShutdown has no kio schema: the fuzzer reads, mutates and writes it
with the broker's own codec, and reads its responses).

Found in review of issue 12: ControlledShutdown (7), OffsetForLeaderEpoch (23),
DescribeProducers (61) and AllocateProducerIds (67) were served but had no seed, so the live
fuzzer never sent them except by accident (a damaged api key), and then took the broker's
ControlledShutdown answer for a malformed response.
"""

from __future__ import annotations

import random
from collections import Counter

from moldau.broker.dispatch import load_handlers, parse_frame
from moldau.protocol import controlled_shutdown
from moldau.protocol.api_keys import ApiKey, api_name
from moldau.protocol.messages import response_header_bytes
from tests.faults.fuzz.batches import BatchMutator
from tests.faults.fuzz.corpus import read_corpus
from tests.faults.fuzz.mutate import (
    ControlledShutdownBody,
    Pools,
    RequestMutator,
    decode_any_response,
)
from tests.faults.fuzz.support import seed_batches


def mutator(seed: int = 1) -> tuple[RequestMutator, dict[int, tuple[int, int]]]:
    served = {k: (s.min_version, s.max_version) for k, s in load_handlers().items()}
    seeds = read_corpus()
    rng = random.Random(seed)
    return RequestMutator(seeds, served, rng, Pools(reference=("fuzz-ref",)),
                          BatchMutator(rng, list(seed_batches(seeds)))), served


def test_every_served_api_and_version_has_a_seed_the_mutator_reads() -> None:
    requests, served = mutator()
    missing = [f"{api_name(k)} ({k}) v{v}" for k, (lo, hi) in sorted(served.items())
               for v in range(lo, hi + 1) if (k, v) not in requests.pairs]
    assert not missing, (f"no seed for {missing}: add a template to tests/faults/fuzz/"
                         f"capture.py and run `python -m tests.faults.fuzz.capture "
                         f"--missing-only`")


def test_controlled_shutdown_inputs_are_mutated_and_the_broker_reads_them() -> None:
    requests, _served = mutator(7)
    parsed: Counter[str] = Counter()
    bodies = set()
    for _ in range(300):
        payload, size, note = requests.next(api=ApiKey.CONTROLLED_SHUTDOWN)
        if size is not None or "7v" not in note.split(" ")[0]:
            continue
        try:
            header, spec, request = parse_frame(payload)
        except Exception as exc:  # damaged on purpose: refused by the broker's parser
            parsed[type(exc).__name__] += 1
            continue
        if header.api_key == ApiKey.CONTROLLED_SHUTDOWN and spec is not None:
            parsed["read"] += 1
            bodies.add((request.broker_id, request.broker_epoch))
    assert parsed["read"] > 100, parsed
    assert len(bodies) > 10, bodies  # the fields are mutated, not only the bytes
    assert any(broker_id == 1 for broker_id, _epoch in bodies)  # the fuzz broker's own id


def test_the_fuzzer_reads_controlled_shutdown_responses() -> None:
    for version in range(controlled_shutdown.MIN_VERSION, controlled_shutdown.MAX_VERSION + 1):
        body = controlled_shutdown.encode_response_body(
            version, controlled_shutdown.ControlledShutdownResponse(0, (("fuzz-a", 2),)))
        frame = response_header_bytes(ApiKey.CONTROLLED_SHUTDOWN, version, 42) + body
        cid, response = decode_any_response(ApiKey.CONTROLLED_SHUTDOWN, version, frame)
        assert (cid, response.error_code, response.remaining_partitions) == (
            42, 0, (("fuzz-a", 2),))
    assert ControlledShutdownBody(1).broker_epoch == -1
