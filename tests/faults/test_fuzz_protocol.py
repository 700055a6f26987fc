"""Fuzz the frame decoder, request decoding and the batch validator: 100,000 inputs, no crash.

The atheris (libFuzzer) target lives in fuzz/fuzz_frames.py; it starts from a corpus of valid
frames and batches and mutates them, coverage-guided. A crash (an exception the broker would
not turn into an error code or a clean disconnect) makes libFuzzer exit non-zero.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent / "fuzz"
RUNS = 100_000


def seed_dir(tmp_path: Path) -> Path:
    """The real-client seeds in fuzz_frames.py's input format (first byte = mode)."""
    from tests.faults.fuzz.corpus import read_corpus
    from tests.faults.fuzz.support import seed_batches

    out = tmp_path / "seeds"
    out.mkdir()
    seeds = read_corpus()
    for i, seed in enumerate(seeds):
        (out / f"request-{i}").write_bytes(b"\x01" + seed.frame)
    for i, batch in enumerate(seed_batches(seeds)):
        (out / f"batch-{i}").write_bytes(b"\x02" + batch)
    return out


def rss_limit_mb(growth_mb: int = 2048) -> int:
    """libFuzzer's out-of-memory limit for a child of this process: ``growth_mb`` (its
    default limit) above the peak RSS the child inherits. libFuzzer reads the peak from
    getrusage, and Linux carries the parent's peak over into a child started with vfork and
    exec (as subprocess does): a pytest process that once held 4 GB made the fuzzer report
    out-of-memory before its first input."""
    inherited_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return inherited_mb + growth_mb


def test_fuzz_frames_and_batches(tmp_path: Path) -> None:
    work = tmp_path / "corpus"
    work.mkdir()
    seeds = seed_dir(tmp_path)
    assert len(list(seeds.iterdir())) > 150
    proc = subprocess.run(
        [sys.executable, str(HERE / "fuzz_frames.py"), f"-runs={RUNS}", "-max_len=4096",
         f"-rss_limit_mb={rss_limit_mb()}",
         "-seed=1", str(work), str(HERE / "corpus"), str(seeds)],
        capture_output=True, text=True, timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    done = re.search(r"Done (\d+) runs", output)
    assert done is not None and int(done.group(1)) >= RUNS, output[-2000:]
