"""The live fuzzer's short run (issue 11, acceptance 2): mutated real-client requests and
CRC-valid lying record batches against a ``moldau serve`` subprocess.

30,000 inputs (``MOLDAU_FUZZ_INPUTS``) with a random seed (``MOLDAU_FUZZ_SEED`` to repeat
one; the seed is printed): every request answered or its connection closed, no handler
traceback, broker RSS under 400 MiB, no invalid record set acknowledged, the ledger and the
reference data read back by confluent-kafka and kafka-python, every partition readable to its
end, and all of it again after a clean and a kill -9 restart. Each finding is saved as JSON and
the failure message says how to replay it. The long run (1,000,000 inputs) and what the
checks mean: docs/testing.md, "Fuzzing".

Nothing is excluded by default. ``MOLDAU_FUZZ_EXCLUDE=all`` (or a comma list) leaves out the
input classes of defects found earlier (all fixed), to isolate a regression locally.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.faults.fuzz.live import Fuzzer, Settings, parse_known

INPUTS = int(os.environ.get("MOLDAU_FUZZ_INPUTS", "30000"))


@pytest.mark.slow  # ~100 s: in make test's second (slow) pass
def test_live_fuzz_short_run(tmp_path: Path) -> None:
    seed = int(os.environ.get("MOLDAU_FUZZ_SEED") or random.randrange(1 << 31))
    print(f"\n[fuzz] short run, seed {seed} (MOLDAU_FUZZ_SEED={seed} repeats it)")
    settings = Settings(inputs=INPUTS, seed=seed, mode="both",
                        exclude_known=parse_known(os.environ.get("MOLDAU_FUZZ_EXCLUDE", "")),
                        findings=tmp_path / "findings", progress_every=30.0)
    fuzzer = Fuzzer(settings)
    try:
        ok = fuzzer.run()
    finally:
        fuzzer.close()
    assert fuzzer.done >= INPUTS, f"only {fuzzer.done} of {INPUTS} inputs were sent"
    summary = "\n".join(
        f"- [{f.kind}{', ' + f.known if f.known else ''}] x{f.count} {f.signature}: "
        f"{f.detail.strip().splitlines()[-1][:200] if f.detail.strip() else ''}"
        for f in fuzzer.failures())
    assert ok, (f"live fuzzing, seed {seed}: {len(fuzzer.failures())} distinct findings "
                f"(saved in {settings.findings}; replay one with `.venv/bin/python -m "
                f"tests.faults.fuzz.live --replay FILE`):\n{summary}")
