"""What the live fuzzer (:mod:`.live`) sends: inputs made by the request mutator
(:mod:`.mutate`) and the batch mutator (:mod:`.batches`), and the vetting that says how the
broker must react to each one, or that it must not be sent (it would touch the reference data,
change a broker-wide setting, exceed the partition budget, or belongs to an excluded class of
known defects)."""

from __future__ import annotations

import collections
import logging
import random
from typing import TYPE_CHECKING, Any

from moldau.broker.dispatch import Disconnect, parse_frame
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build, to_dict
from moldau.protocol.produce_request import ProduceRequestData

from . import checks
from .batches import BatchMutator, check_batches
from .corpus import PLAYGROUND_TOPICS
from .mutate import DESTROYS, WRITES, Pools, RequestMutator, encode, sanitize
from .support import ms, names, partitions_asked

if TYPE_CHECKING:
    from .live import Settings

log = logging.getLogger("fuzz")
# Input classes of defects the fuzzer found (issue 11's numbers and its own findings; all
# fixed): ``--exclude-known`` leaves their inputs out, to isolate a regression or to run
# green while a new fix is pending (docs/testing.md, "Fuzzing").
KNOWN: frozenset[int | str] = frozenset({1, 2, 5, 10, 11, "fetch-null-topic-id",
                                         "join-protocol"})
PARTITION_BUDGET = 400  # partitions fuzzed CreateTopics/CreatePartitions may add in one run

# (expect, allowed wait in seconds, parsed request, api/version); see Inputs.vet.
Verdict = tuple[str, float, Any, str]


class Inputs:
    """Makes and vets the inputs of one run (``stats`` counts what was made and skipped)."""

    def __init__(self, settings: Settings, rng: random.Random, mutator: RequestMutator,
                 batches: BatchMutator, pools: Pools,
                 stats: collections.Counter[str]) -> None:
        self.s = settings
        self.rng = rng
        self.mutator = mutator
        self.batches = batches
        self.pools = pools
        self.stats = stats
        self.partition_budget = PARTITION_BUDGET

    def make(self, n: int) -> tuple[bytes, int | None, str]:
        """Input ``n``: (payload without size prefix, size to announce or None, note)."""
        mode = self.s.mode
        if mode == "both":
            mode = "batches" if n % 3 == 2 else "requests"
        if mode == "batches":
            return self.batch_input()
        return self.mutator.next()

    def batch_input(self) -> tuple[bytes, int | None, str]:
        """A Produce request (a real client's, any served version) carrying one mutated
        CRC-valid record set per partition."""
        rng = self.rng
        payload, size, note = self.mutator.next(api=ApiKey.PRODUCE) if rng.random() < 0.1 else (
            None, None, "")
        if payload is not None:
            return payload, size, "batches/" + note
        key = rng.choice([p for p in self.mutator.pairs if p[0] == ApiKey.PRODUCE])
        header, entity, _frame = rng.choice(self.mutator.decoded[key])
        topic = rng.choice(["fuzz-a", "fuzz-b", "fuzz-compact", "fuzz-compact", "fuzz-small",
                            "fuzz-free-0"])
        partitions = PLAYGROUND_TOPICS.get(topic, (1, {}))[0]
        keyless = None if topic != "fuzz-compact" else rng.random() < 0.5
        data = [{"index": rng.randrange(partitions),
                 "records": self.batches.blob(
                     invalid=0.8, keyless=keyless, compacted=topic == "fuzz-compact",
                     crc_break_invalid=bool(self.s.exclude_known & {1, 11}))}
                for _ in range(rng.choice([1, 1, 1, 2]))]
        body = to_dict(entity)
        body["acks"] = rng.choice([-1, -1, 1, 0])
        body["topic_data"] = [{"name": topic, "partition_data": data}]
        try:
            payload = encode(key[0], key[1], header.client_id, build(type(entity), body))
        except Exception:
            return self.mutator.next(api=ApiKey.PRODUCE)
        return payload, None, f"batches/{key[0]}v{key[1]} {topic}"

    def vet(self, payload: bytes) -> Verdict | None:
        try:
            return self._vet(payload)
        except Exception as exc:
            if self.stats["vet-error"] < 3:
                log.warning("vetting an input failed: %s: %s", type(exc).__name__, exc)
            self.stats["vet-error"] += 1
            return None

    def _vet(self, payload: bytes) -> Verdict | None:
        """How the broker must react to ``payload`` (it runs the broker's own parser):
        (expect, allowed wait, parsed request, api/version). None: do not send it (it would
        touch the reference data, exceed the partition budget, or is excluded as known)."""
        try:
            header, spec, request = parse_frame(payload)
        except Disconnect:
            return "close", 0.0, None, ""
        except Exception as exc:
            return "parser-raised:" + type(exc).__name__, 0.0, None, ""
        if spec is None:
            return "fallback", 0.0, None, ""
        api = header.api_key
        if isinstance(request, ProduceRequestData):
            if any(t in checks.REFERENCE_TOPICS for t, _ in request.topics):
                self.stats["skip:reference"] += 1
                return None
            if self.s.exclude_known & {1, 11}:
                for topic, parts in request.topics:
                    for _p, blob in parts:
                        checked = check_batches(blob, compacted=topic == "fuzz-compact")
                        problem = checked.problem
                        if problem and problem.startswith("header:"):
                            continue  # refused by the CRC/header checks of today's broker
                        if checked.odd_key or (problem and (
                                ("keyless" in problem and 11 in self.s.exclude_known)
                                or ("keyless" not in problem and 1 in self.s.exclude_known))):
                            self.stats["skip:known-batch"] += 1
                            return None
            return ("none" if request.acks == 0 else "response"), 0.0, request, ""
        named = names(request)
        if api in WRITES | DESTROYS and named & set(checks.REFERENCE_TOPICS):
            self.stats["skip:reference"] += 1
            return None
        if api in DESTROYS and named & set(PLAYGROUND_TOPICS):
            self.stats["skip:playground"] += 1
            return None
        # Broker-wide settings (resource types 4, 8) would change what every topic does.
        if (api in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)
                and not request.validate_only
                and any(r.resource_type != 2 for r in request.resources)):
            self.stats["skip:broker-config"] += 1
            return None
        if api == ApiKey.DELETE_TOPICS and any(
                t.topic_id in set(self.pools.topic_ids.get(n) for n in
                                  (*checks.REFERENCE_TOPICS, *PLAYGROUND_TOPICS))
                for t in getattr(request, "topics", ()) or ()):
            return None
        if api in (ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS) and not request.validate_only:
            wanted = partitions_asked(api, request)
            if wanted > self.partition_budget:
                self.stats["skip:partition-budget"] += 1
                return None
            self.partition_budget -= wanted
        excluded = self.s.exclude_known
        if ("fetch-null-topic-id" in excluded and api == ApiKey.FETCH
                and any(t.topic_id is None for t in getattr(request, "topics", ())
                        if hasattr(t, "topic_id"))):
            self.stats["skip:known-fetch"] += 1
            return None
        if "join-protocol" in excluded and api == ApiKey.JOIN_GROUP and (
                "range" not in {p.name for p in request.protocols}
                or request.protocol_type != "consumer"):
            self.stats["skip:known-join"] += 1
            return None
        if sanitize(api, request, self.s.exclude_known) != request:
            self.stats["skip:unsanitized"] += 1
            return None  # byte-level damage made a long wait or an excluded class: skip it
        wait = 0.0
        if api == ApiKey.FETCH and request.min_bytes > 0:
            wait = max(0, ms(request.max_wait)) / 1000
        elif api in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP):
            wait = 10.0  # a rebalance waits for the other members up to their timeouts
        return "response", wait, request, ""


def parse_known(text: str) -> frozenset[int | str]:
    if text in ("", "none"):
        return frozenset()
    if text == "all":
        return KNOWN
    out = frozenset(int(x) if x.isdigit() else x for x in text.split(","))
    unknown = out - KNOWN
    if unknown:
        raise SystemExit(f"--exclude-known: unknown classes {sorted(map(str, unknown))}; "
                         f"known: {sorted(map(str, KNOWN))}")
    return out
