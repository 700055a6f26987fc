"""The live fuzzer's findings (:mod:`.live`): one per distinct signature, counted, printed
with the seed, input number and hex of the input, and saved as JSON for ``--replay``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .support import Finding


class Findings:
    """The distinct findings of one run, saved under ``directory``."""

    def __init__(self, seed: int, mode: str, directory: Path) -> None:
        self.seed = seed
        self.mode = mode
        self.directory = directory
        self.by_signature: dict[str, Finding] = {}

    def __len__(self) -> int:
        return len(self.by_signature)

    def all(self) -> list[Finding]:
        return list(self.by_signature.values())

    def add(self, kind: str, signature: str, detail: str, inputs: list[tuple[int, bytes]],
            known: str = "") -> None:
        """Record a finding; a signature seen before only counts once more."""
        existing = self.by_signature.get(signature)
        if existing is not None:
            existing.count += 1
            return
        f = Finding(kind, signature, detail, inputs, known)
        self.by_signature[signature] = f
        first = inputs[0] if inputs else (-1, b"")
        path = self.save(f)
        print(f"[fuzz] FINDING ({kind}{', ' + known if known else ''}): {signature}\n"
              f"  seed {self.seed}, input {first[0]}: {first[1][:256].hex()}"
              f"{'...' if len(first[1]) > 256 else ''}\n  {detail.splitlines()[-1][:300]}\n"
              f"  saved to {path}; replay: .venv/bin/python -m tests.faults.fuzz.live "
              f"--replay {path}", flush=True)

    def save(self, f: Finding) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        n = f.inputs[0][0] if f.inputs else -1
        slug = re.sub(r"[^a-z0-9]+", "-", f.signature.lower())[:40].strip("-")
        path = self.directory / f"{self.seed}-{n}-{f.kind}-{slug}.json"
        path.write_text(json.dumps({
            "seed": self.seed, "input": n, "kind": f.kind, "signature": f.signature,
            "known": f.known, "detail": f.detail, "mode": self.mode,
            "frames": [{"input": i, "hex": data.hex()} for i, data in f.inputs]}, indent=1))
        return path

    def report(self) -> None:
        if not self.by_signature:
            print(f"[fuzz] seed {self.seed}: no findings", flush=True)
            return
        print(f"[fuzz] seed {self.seed}: {len(self)} distinct findings:", flush=True)
        for f in self.by_signature.values():
            first = f.inputs[0][0] if f.inputs else -1
            print(f"  - [{f.kind}{', ' + f.known if f.known else ''}] x{f.count} "
                  f"{f.signature} (input {first})", flush=True)
