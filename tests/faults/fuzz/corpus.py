"""The seed corpus of the live fuzzer: request frames real clients sent, plus built ones.

``requests.corpus`` (next to this file) holds request frames without their size prefix, each
labelled with where it came from (``confluent-kafka``, ``kafka-python``, ``aiokafka``, ``kcat``,
``kafkajs``, or ``built`` for versions no client sends). Regenerate it with
``.venv/bin/python -m tests.faults.fuzz.capture`` (see that module and docs/testing.md).

File format (gzip-compressed, so the file stays small in the repository): the magic line
``MOLDAU-FUZZ-CORPUS 1\\n``, then per frame ``uint8 len, source (ASCII), uint32 len, frame``.

The names below are shared by the capture run and the fuzz run, so the captured requests
address topics and groups that exist when they are replayed.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CORPUS_PATH = Path(__file__).with_name("requests.corpus")
_MAGIC = b"MOLDAU-FUZZ-CORPUS 1\n"
_U32 = struct.Struct(">I")
_HEAD = struct.Struct(">hhi")

# Topics the fuzz run creates before it starts, which the capture's clients also use. The
# fuzzer may produce to them, read them and delete their records, but never deletes them or
# changes their configuration (its checks depend on what they are).
PLAYGROUND_TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "fuzz-a": (3, {}),
    "fuzz-b": (1, {}),
    "fuzz-compact": (1, {"cleanup.policy": "compact"}),
    "fuzz-small": (1, {"max.message.bytes": "4096"}),
}
# Topics anything may happen to (created, deleted, reconfigured by fuzzed admin requests).
FREE_TOPICS = ("fuzz-free-0", "fuzz-free-1", "fuzz-free-2")
GROUPS = ("fuzz-group-0", "fuzz-group-1", "fuzz-group-848")


@dataclass(frozen=True, slots=True)
class Seed:
    """One request frame (no size prefix) and where it came from."""

    source: str
    frame: bytes

    @property
    def api_key(self) -> int:
        return _HEAD.unpack_from(self.frame)[0]

    @property
    def api_version(self) -> int:
        return _HEAD.unpack_from(self.frame)[1]


def write_corpus(seeds: Iterable[Seed], path: Path = CORPUS_PATH) -> int:
    """Write ``seeds`` to ``path``; returns how many were written."""
    out = bytearray(_MAGIC)
    n = 0
    for seed in seeds:
        source = seed.source.encode("ascii")
        out += bytes([len(source)]) + source + _U32.pack(len(seed.frame)) + seed.frame
        n += 1
    # mtime=0: the same seeds give the same file, so regenerating shows no spurious diff.
    path.write_bytes(gzip.compress(bytes(out), compresslevel=9, mtime=0))
    return n


def read_corpus(path: Path = CORPUS_PATH) -> list[Seed]:
    """Every seed in ``path``."""
    data = gzip.decompress(path.read_bytes())
    if not data.startswith(_MAGIC):
        raise ValueError(f"{path} is not a Moldau fuzz corpus (bad magic line)")
    pos = len(_MAGIC)
    seeds = []
    while pos < len(data):
        n = data[pos]
        source = data[pos + 1 : pos + 1 + n].decode("ascii")
        pos += 1 + n
        (size,) = _U32.unpack_from(data, pos)
        pos += 4
        seeds.append(Seed(source, data[pos : pos + size]))
        pos += size
    return seeds
