"""What the benchmark scripts share: where their JSON results go."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write_result(result: dict[str, Any], out: Path | None, name: str) -> Path:
    """``result`` as indented JSON in ``out`` (default bench/results/<name>-<time>.json);
    prints where it went."""
    out = out or RESULTS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return out
