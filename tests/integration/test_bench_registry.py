"""bench/registry.py run with tiny numbers, so the benchmark cannot rot: one broker with its
in-process registry, registrations (new and repeated) and lookups (by id, of a schema) by one
and by several clients, the three produce halves (plain, encode, AvroSerializer), and the JSON
report with every figure."""

from __future__ import annotations

import json
from pathlib import Path

from bench import registry


def test_registry_benchmark_runs_every_part_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "registry.json"
    code = registry.main([
        "--registrations", "40", "--lookups", "100", "--concurrency", "4", "--records", "3000",
        "--repeat", "1", "--no-pin", "--workdir", str(tmp_path), "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    parts = result["registry"]
    for name in ("register_new", "register_existing", "lookup_id", "lookup_schema"):
        for clients in (1, 4):
            part = parts[f"{name}_c{clients}"]
            expected = 40 if name.startswith("register") else 100
            assert (part["requests"], part["concurrency"]) == (expected, clients)
            assert part["per_s"] > 0 and part["broker_cpu_ms_per_request"] >= 0
    (only,) = result["serializer"]["passes"]
    for half in ("plain", "encode", "avro"):
        assert only[half]["records"] == 3000 and only[half]["records_per_s"] > 0
    # the serializer's records carry the 5-byte framing (magic byte, schema id)
    assert only["avro"]["bytes_per_record"] == only["encode"]["bytes_per_record"] \
        == only["plain"]["bytes_per_record"] + 5
    summary = result["summary"]
    assert set(summary) == {
        "registrations_per_s_c1", "registrations_per_s_c4", "existing_registrations_per_s_c1",
        "lookups_by_id_per_s_c1", "lookups_by_id_per_s_c4", "lookups_of_schema_per_s_c1",
        "lookups_of_schema_per_s_c4", "serializer_vs_plain", "serializer_vs_encode"}
    assert all(value > 0 for value in summary.values())
    assert summary["serializer_vs_plain"] == result["serializer"]["ratio_median"] == \
        only["ratio"]
