"""bench/rest_proxy.py run with tiny numbers, so the benchmark cannot rot: one broker and one
``moldau rest-proxy`` subprocess, every phase (direct, v2 produce, v3 streaming produce, v2
consume, direct consume) and every figure in the JSON report."""

from __future__ import annotations

import json
from pathlib import Path

from bench import rest_proxy


def test_rest_proxy_benchmark_runs_every_phase_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "rest_proxy.json"
    code = rest_proxy.main(["--records", "600", "--batch", "100", "--connections", "2",
                            "--streams", "2", "--partitions", "2", "--repeat", "1",
                            "--workdir", str(tmp_path / "work"), "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "rest_proxy"
    assert result["plan"]["records"] == 600 and result["plan"]["repeat"] == 1
    assert set(result["phases"]) == set(rest_proxy.PHASES)
    for name in rest_proxy.PHASES:
        phase = result["phases"][name]
        assert phase["records"] == 600
        assert phase["records_per_s"] > 0 and phase["seconds"] > 0
        assert phase["broker_cpu_s"] >= 0 and phase["proxy_cpu_s"] >= 0
        assert len(phase["runs"]) == 1
    assert result["phases"]["v2_produce"]["batch"] == 100
    assert result["phases"]["v2_produce"]["connections"] == 2
    assert result["phases"]["v3_stream_produce"]["streams"] == 2
    assert result["phases"]["v2_consume"]["join_s"] >= 0
    for key in ("v2_produce_vs_direct", "v3_stream_vs_direct", "v2_consume_vs_direct"):
        assert result["summary"][key] > 0
