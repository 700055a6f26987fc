"""LogManager: startup over several log dirs, create/delete, checkpoints, clean shutdown,
retention and flush scheduling; meta.properties helpers."""

from __future__ import annotations

import os

import pytest

from moldau.storage import (
    LogConfig,
    LogManager,
    MetaProperties,
    MetaPropertiesError,
    ensure_meta_properties,
    read_meta_properties,
    write_meta_properties,
)
from moldau.storage.checkpoints import read_offset_checkpoint

from .helpers import FakeClock, append, make_batch


def manager(tmp_path, clock=None, **cfg):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    return LogManager(dirs, {k.replace("_", "."): v for k, v in cfg.items()},
                      time_ms=clock or FakeClock())


def test_new_logs_go_to_the_emptiest_dir(tmp_path):
    m = manager(tmp_path)
    m.startup()
    for p in range(4):
        m.get_or_create_log("orders", p)
    dirs = [m.log_dir_of("orders", p) for p in range(4)]
    assert dirs.count(m.log_dirs[0]) == 2 and dirs.count(m.log_dirs[1]) == 2
    assert os.path.isdir(os.path.join(m.log_dirs[0], "orders-0"))
    assert m.get_or_create_log("orders", 0) is m.get_log("orders", 0)


def test_shutdown_writes_checkpoints_and_marker_then_clean_start(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock)
    m.startup()
    logs = {}
    for p in range(3):
        lg = m.get_or_create_log("t.x_y", p, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
        for i in range(5 + p):
            append(lg, make_batch(2, 1000 + i))
        lg.update_high_watermark(lg.log_end_offset - 2)
        logs[p] = (lg.log_end_offset, lg.high_watermark, m.log_dir_of("t.x_y", p))
    m.shutdown()
    for p, (leo, hw, d) in logs.items():
        assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
        rp = read_offset_checkpoint(m._fs, os.path.join(d, "recovery-point-offset-checkpoint"))
        assert rp[("t.x_y", p)] == leo  # flushed at shutdown
        hws = read_offset_checkpoint(m._fs, os.path.join(d, "replication-offset-checkpoint"))
        assert hws[("t.x_y", p)] == hw
        with open(os.path.join(d, f"t.x_y-{p}", "partition.metadata")) as f:
            assert f.read() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
    m2 = manager(tmp_path, clock)
    stats = m2.startup(workers=2)
    assert stats.batches_scanned == 0 and stats.segments_recovered == 0
    assert all(m2.had_clean_shutdown.values())
    for d in m2.log_dirs:
        assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    for p, (leo, hw, _d) in logs.items():
        lg = m2.get_log("t.x_y", p)
        assert (lg.log_end_offset, lg.high_watermark, lg.recovery_point) == (leo, hw, leo)


def test_unclean_start_recovers_from_checkpointed_recovery_point(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock, segment_bytes=500)
    m.startup()
    lg = m.get_or_create_log("t", 0)
    for i in range(20):
        append(lg, make_batch(2, 1000 + i))
    lg.flush()
    rp = lg.recovery_point
    m.checkpoint_all()
    for i in range(5):
        append(lg, make_batch(2, 2000 + i))
    leo = lg.log_end_offset
    lg.close_handles()  # crash
    m2 = manager(tmp_path, clock, segment_bytes=500)
    stats = m2.startup()
    assert not any(m2.had_clean_shutdown.values())
    lg2 = m2.get_log("t", 0)
    assert lg2.log_end_offset == leo
    assert lg2.recovery_point == rp
    assert 0 < stats.segments_recovered < len(lg2.segments)


def test_delete_log_renames_then_removes_after_delay(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock, file_delete_delay_ms=1000)
    m.startup()
    lg = m.get_or_create_log("gone", 1)
    append(lg, make_batch(1))
    d = m.log_dir_of("gone", 1)
    assert m.delete_log("gone", 1)
    assert m.get_log("gone", 1) is None and not m.delete_log("gone", 1)
    names = os.listdir(d)
    assert "gone-1" not in names
    (deleted,) = [n for n in names if n.endswith("-delete")]
    assert deleted.startswith("gone-1.") and len(deleted) == len("gone-1.") + 32 + len("-delete")
    m.remove_deleted(clock.now + 999)
    assert os.path.exists(os.path.join(d, deleted))
    m.remove_deleted(clock.now + 1000)
    assert not os.path.exists(os.path.join(d, deleted))
    # A -delete dir left by a crash is removed after the next start.
    lg = m.get_or_create_log("gone", 2)
    m.delete_log("gone", 2)
    m2 = manager(tmp_path, clock)
    m2.startup()
    assert m2.get_log("gone", 2) is None
    m2.remove_deleted()
    assert not [n for d in m2.log_dirs for n in os.listdir(d) if n.endswith("-delete")]


def test_run_retention_and_flush_due(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock, segment_bytes=400, retention_ms=60_000, flush_ms=5000,
                file_delete_delay_ms=0)
    m.startup()
    lg = m.get_or_create_log("r", 0)
    for i in range(20):
        append(lg, make_batch(2, clock.now + i))
    lg.update_high_watermark(lg.log_end_offset)
    # A rolled segment is flushed by flush_due even before flush.ms passes.
    assert lg.recovery_point == 0
    assert m.flush_due() == 1
    assert 0 < lg.recovery_point <= lg.active_segment.base_offset
    clock.advance(5000)
    assert m.flush_due() == 1 and lg.recovery_point == lg.log_end_offset
    assert m.flush_due() == 0
    clock.advance(120_000)
    n = len(lg.segments)
    assert m.run_retention() == n
    assert len(lg.segments) == 1 and lg.active_segment.size == 0
    assert not [n for n in os.listdir(lg.dir) if n.endswith(".deleted")]


def test_topic_config_source_and_update(tmp_path):
    cfgs = {"compacted": {"cleanup.policy": "compact"}}
    m = LogManager([str(tmp_path / "d")], {"segment.bytes": "1000"},
                   topic_config=lambda t: cfgs.get(t))
    m.startup()
    a = m.get_or_create_log("compacted", 0)
    b = m.get_or_create_log("plain", 0)
    assert a.config.compact and a.config.segment_bytes == 1000
    assert not b.config.compact
    cfgs["plain"] = {"retention.ms": "5"}
    m.update_topic_config("plain")
    assert b.config.retention_ms == 5 and b.config.segment_bytes == 1000


def test_duplicate_partition_in_two_dirs_is_refused(tmp_path):
    m = manager(tmp_path)
    m.startup()
    m.get_or_create_log("dup", 0)
    m.shutdown()
    src = os.path.join(str(tmp_path / "d1"), "dup-0")
    os.makedirs(os.path.join(str(tmp_path / "d2"), "dup-0"))
    assert os.path.isdir(src)
    with pytest.raises(Exception, match="exists in both"):
        manager(tmp_path).startup()


def test_malformed_checkpoint_means_full_recovery(tmp_path):
    clock = FakeClock()
    m = manager(tmp_path, clock)
    m.startup()
    lg = m.get_or_create_log("t", 0)
    append(lg, make_batch(3))
    d = m.log_dir_of("t", 0)
    m.shutdown()
    os.remove(os.path.join(d, ".kafka_cleanshutdown"))
    with open(os.path.join(d, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n5\nnot a line\n")
    m2 = manager(tmp_path, clock)
    stats = m2.startup()
    assert stats.segments_recovered == 1
    assert m2.get_log("t", 0).log_end_offset == 3


def test_meta_properties(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    metas = ensure_meta_properties(dirs, node_id=3, cluster_id="MkU3OEVBNTcwNTJENDM2Qg")
    ids = {m.directory_id for m in metas.values()}
    assert len(ids) == 2 and all(len(i) == 22 for i in ids)
    text = (tmp_path / "a" / "meta.properties").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines == [
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qg",
        f"directory.id={metas[dirs[0]].directory_id}",
        "node.id=3",
        "version=1",
    ]
    again = ensure_meta_properties(dirs, node_id=3, cluster_id="MkU3OEVBNTcwNTJENDM2Qg")
    assert again == metas
    with pytest.raises(MetaPropertiesError, match=r"node\.id=3"):
        ensure_meta_properties(dirs, node_id=4, cluster_id="MkU3OEVBNTcwNTJENDM2Qg")
    with pytest.raises(MetaPropertiesError, match="another cluster"):
        ensure_meta_properties(dirs, node_id=3, cluster_id="other")
    write_meta_properties(dirs[1], MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qg", 3,
                                                  metas[dirs[0]].directory_id))
    with pytest.raises(MetaPropertiesError, match=r"same directory\.id"):
        ensure_meta_properties(dirs, node_id=3, cluster_id="MkU3OEVBNTcwNTJENDM2Qg")
    # A Kafka-written file with Java escapes parses.
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "meta.properties").write_text(
        "#\n#Tue Jan 02\nnode.id=3\nversion=1\ncluster.id=abc\\=\ndirectory.id=x\n")
    meta = read_meta_properties(str(tmp_path / "c"))
    assert (meta.node_id, meta.cluster_id, meta.directory_id) == (3, "abc=", "x")


def test_log_config_parsing():
    cfg = LogConfig.from_dict({"segment.bytes": "2048", "cleanup.policy": "compact,delete",
                               "retention.ms": -1, "min.cleanable.dirty.ratio": "0.25",
                               "unknown.key": "x"})
    assert cfg.segment_bytes == 2048 and cfg.compact and cfg.delete
    assert cfg.retention_ms == -1 and cfg.min_cleanable_dirty_ratio == 0.25
    assert cfg.to_dict()["cleanup.policy"] == "compact,delete"
    from moldau.storage.errors import InvalidLogConfig

    with pytest.raises(InvalidLogConfig, match=r"segment\.bytes"):
        LogConfig.from_dict({"segment.bytes": "10"})
    with pytest.raises(InvalidLogConfig, match=r"cleanup\.policy"):
        LogConfig.from_dict({"cleanup.policy": "forever"})
    with pytest.raises(InvalidLogConfig, match="expected a number"):
        LogConfig.from_dict({"retention.ms": "soon"})
    with pytest.raises(InvalidLogConfig):
        LogConfig.from_dict({"message.timestamp.type": "WallTime"})
    assert cfg.updated({"segment.ms": "5"}).segment_ms == 5
