"""``moldau groups`` with confluent-kafka consumers in the group (acceptance 7 of issue 3):
lag of a group that is behind, members and state while a consumer is active, offset resets
that make the group re-read from the start, offset deletion and group deletion."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from .conftest import moldau, moldau_many, unique

RECORDS = 30


def create_with_records(b: list[str], topic: str) -> None:
    """A 3-partition topic holding RECORDS keyed records, through the CLI."""
    moldau("topics", *b, "--create", "--topic", topic, "--partitions", "3").ok()
    moldau("produce", *b, "--topic", topic, "--property", "parse.key=true",
           "--property", "key.separator=:",
           stdin="".join(f"k{i}:v{i}\n" for i in range(RECORDS))).ok()


def _rows(output: str) -> dict[int, list[str]]:
    """--describe table rows by partition: [GROUP, TOPIC, PARTITION, CURRENT-OFFSET,
    LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID]."""
    lines = output.strip("\n").splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    return {int(r.split()[2]): r.split() for r in lines[1:]}


def _consumer(bootstrap: str, group: str, reset: str = "earliest") -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "client.id": "lag-checker", "auto.offset.reset": reset,
                     "enable.auto.commit": False, "log_level": 3})


def _read(consumer: Consumer, count: int, deadline_s: float = 30) -> list:
    messages: list = []
    deadline = time.monotonic() + deadline_s
    while len(messages) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            messages.append(message)
    return messages


def _watermarks(consumer: Consumer, topic: str) -> dict[int, int]:
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(3)}


def test_describe_lag_reset_and_delete(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topic, group = unique("lag"), unique("lag-group")
    create_with_records(b, topic)

    # An active member that read some records and committed them: the group is behind.
    first = _consumer(bootstrap, group)
    first.subscribe([topic])
    read = _read(first, 12)
    assert len(read) == 12
    first.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in first.committed(
        [TopicPartition(topic, p) for p in range(3)], timeout=10)}
    ends = _watermarks(first, topic)
    member = first.memberid()

    active, members, state, reset_active, delete_active, listing = moldau_many(
        ["groups", *b, "--describe", "--group", group],
        ["groups", *b, "--describe", "--group", group, "--members", "--verbose"],
        ["groups", *b, "--describe", "--group", group, "--state"],
        ["groups", *b, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
         "--execute"],
        ["groups", *b, "--delete", "--group", group],
        ["groups", *b, "--list", "--state"],
    )
    rows = _rows(active.ok().stdout)
    assert sorted(rows) == [0, 1, 2]
    for p, row in rows.items():
        assert row[:3] == [group, topic, str(p)]
        if committed[p] >= 0:
            assert row[3:6] == [str(committed[p]), str(ends[p]), str(ends[p] - committed[p])]
        else:  # nothing read from this partition yet
            assert row[3:6] == ["-", str(ends[p]), "-"]
        assert row[6] == member and row[8] == "lag-checker"
    assert sum(int(r[5]) for r in rows.values() if r[5] != "-") == sum(
        ends[p] - committed[p] for p in range(3) if committed[p] >= 0)
    member_lines = members.ok().stdout.strip("\n").splitlines()
    assert member_lines[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                       "#PARTITIONS", "ASSIGNMENT"]
    cells = member_lines[1].split()
    assert (cells[0], cells[1], cells[3], cells[4]) == (group, member, "lag-checker", "3")
    assert member_lines[1].endswith(f"{topic}(0,1,2)")
    state_cells = state.ok().stdout.strip("\n").splitlines()[1].split()
    assert state_cells[0] == group and state_cells[-2:] == ["Stable", "1"]
    assert (f"Assignments can only be reset if the group '{group}' is inactive, but the current "
            "state is Stable.") in reset_active.failed().stderr
    assert f"* Group '{group}' could not be deleted due to:" in delete_active.failed().stderr
    assert [line.split() for line in listing.ok().stdout.splitlines()
            if line.startswith(group)] == [[group, "Stable"]]

    first.close()
    inactive, dry_run = moldau_many(
        ["groups", *b, "--describe", "--group", group],
        ["groups", *b, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
         "--dry-run"],
    )
    assert f"Consumer group '{group}' has no active members." in inactive.ok().stderr
    rows = _rows(inactive.stdout)
    assert sorted(rows) == sorted(p for p in range(3) if committed[p] >= 0)
    assert all(r[6:] == ["-", "-", "-"] for r in rows.values())
    assert dry_run.ok().stdout.strip("\n").splitlines() == [
        f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}",
        *[f"{group:<30} {topic:<30} {p:<10} {0:<15}" for p in range(3)]]
    # A dry run changes nothing.
    assert _rows(moldau("groups", *b, "--describe", "--group", group).ok().stdout) == rows

    # --execute: the group re-reads from the start, even with auto.offset.reset=latest.
    moldau("groups", *b, "--reset-offsets", "--group", group, "--topic", topic,
           "--to-earliest", "--execute").ok()
    rows = _rows(moldau("groups", *b, "--describe", "--group", group).ok().stdout)
    assert {p: r[3:6] for p, r in rows.items()} == {
        p: ["0", str(ends[p]), str(ends[p])] for p in range(3)}
    again = _consumer(bootstrap, group, reset="latest")
    again.subscribe([topic])
    try:
        reread = _read(again, RECORDS)
        assert sorted(m.value().decode() for m in reread) == sorted(
            f"v{i}" for i in range(RECORDS))
    finally:
        again.close()


def test_reset_scenarios_and_offset_deletion(bootstrap: str, tmp_path: Path) -> None:
    b = ["-b", bootstrap]
    topic, group = unique("scen"), unique("scen-group")
    create_with_records(b, topic)
    moldau("groups", *b, "--reset-offsets", "--group", group, "--topic", f"{topic}:0,1,2",
           "--to-offset", "2", "--execute").ok()
    probe = _consumer(bootstrap, unique("probe"))
    try:
        ends = _watermarks(probe, topic)
    finally:
        probe.close()

    shift, beyond, latest, future, past, csv = moldau_many(
        ["groups", *b, "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-5",
         "--export"],
        ["groups", *b, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset",
         "1000", "--export", "--dry-run"],
        ["groups", *b, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest",
         "--export", "--dry-run"],
        ["groups", *b, "--reset-offsets", "--group", group, "--topic", f"{topic}:1",
         "--to-datetime", "2999-01-01T00:00:00.000", "--export", "--dry-run"],
        ["groups", *b, "--reset-offsets", "--group", group, "--topic", f"{topic}:1",
         "--by-duration", "PT1H", "--export", "--dry-run"],
        ["groups", *b, "--reset-offsets", "--group", group, "--all-topics", "--to-current",
         "--export", "--dry-run"],
    )
    assert shift.ok().stdout.splitlines() == [f"{topic},{p},0" for p in range(3)]
    assert "No action will be performed as the --execute option is missing" in shift.stderr
    assert "is lower than earliest offset" in shift.stderr
    assert beyond.ok().stdout.splitlines() == [f"{topic},{p},{ends[p]}" for p in range(3)]
    assert latest.ok().stdout.splitlines() == [f"{topic},{p},{ends[p]}" for p in range(3)]
    assert future.ok().stdout.splitlines() == [f"{topic},1,{ends[1]}"]
    assert "Falling back to latest known offset" in future.stderr
    assert past.ok().stdout.splitlines() == [f"{topic},1,0"]
    assert csv.ok().stdout.splitlines() == [f"{topic},{p},2" for p in range(3)]

    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,5\n{topic},2,7\n")
    moldau("groups", *b, "--reset-offsets", "--group", group, "--from-file", str(plan),
           "--execute").ok()
    rows = _rows(moldau("groups", *b, "--describe", "--group", group).ok().stdout)
    assert {p: r[3] for p, r in rows.items()} == {0: "5", 1: "2", 2: "7"}

    deleted_offsets = moldau("groups", *b, "--delete-offsets", "--group", group,
                             "--topic", f"{topic}:1").ok()
    assert deleted_offsets.stdout.strip("\n").splitlines() == [
        f"Request succeed for deleting offsets with topic {topic}:1 group {group}", "",
        f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}",
        f"{topic:<30} {'1':<15} {'Successful':<15}"]
    rows = _rows(moldau("groups", *b, "--describe", "--group", group).ok().stdout)
    assert sorted(rows) == [0, 2]

    deleted, gone, listing, usage = moldau_many(
        ["groups", *b, "--delete", "--group", group],
        ["groups", *b, "--describe", "--group", unique("never-existed")],
        ["groups", *b, "--list"],
        ["groups", *b, "--reset-offsets", "--group", group, "--to-earliest"],
    )
    assert deleted.ok().stdout.strip() == (
        f"Deletion of requested consumer groups ('{group}') was successful.")
    assert "does not exist." in gone.failed().stderr
    assert "One of the reset scopes should be defined: --all-topics, --topic." in (
        usage.failed(2).stderr)
    after = moldau("groups", *b, "--list").ok()
    assert group not in after.stdout.splitlines()
    assert listing.returncode == 0
