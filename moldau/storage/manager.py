"""All partition logs of all ``log.dirs`` (Kafka's LogManager).

Every method is a plain blocking call. The broker decides what runs off the event loop:
:meth:`LogManager.startup` (recovery), :meth:`run_retention`, :meth:`flush_due`,
:meth:`checkpoint_all` and :meth:`shutdown` are safe to run in a worker thread while the event
loop appends to and reads from logs (each :class:`Log` has its own lock; the manager's lock
only guards its map of logs).

Per log dir: partition dirs ``<topic>-<partition>``, the checkpoint files
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` (high watermarks), and ``.kafka_cleanshutdown`` between a
clean shutdown and the next start. Deleted logs are renamed to
``<topic>-<partition>.<uuid hex>-delete`` and removed after ``file.delete.delay.ms``.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from .checkpoints import (
    MalformedCheckpoint,
    read_offset_checkpoint,
    write_clean_shutdown_marker,
    write_offset_checkpoint,
    write_partition_metadata,
)
from .cleaner import CleanResult, clean_log, dirty_ratio
from .config import LogConfig
from .errors import KafkaStorageError, LogDirError
from .fs import DEFAULT_FS, FileSystem
from .handles import HANDLE_POOL, open_descriptors, open_file_limit, reserve
from .health import DISK_HEALTH, DiskHealth, advice
from .loader import LoadStats, load_log
from .log import Log, wall_clock_ms
from .names import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    delete_dir_name,
    is_delete_dir,
    parse_partition_dir,
    partition_dir_name,
)

log = logging.getLogger(__name__)

_CHECKPOINTS_SAFE_TO_RESET = frozenset({RECOVERY_POINT_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT})
# What a user may do about a malformed checkpoint file, and what it costs.
_CHECKPOINT_FIX = {
    RECOVERY_POINT_CHECKPOINT:
        "Every partition of the dir is recovered (CRC-checked) from its first segment: a "
        "slower start, no data lost.",
    LOG_START_OFFSET_CHECKPOINT:
        "Fix that line ('topic partition offset'). Deleting the line (or the file) makes the "
        "partition start at its oldest segment again, so records removed by DeleteRecords or "
        "retention within that segment become readable again.",
    REPLICATION_OFFSET_CHECKPOINT:
        "Fix that line ('topic partition offset') or delete it; a partition without an entry "
        "recomputes its high watermark from its replicas.",
    CLEANER_OFFSET_CHECKPOINT:
        "Compacted partitions are cleaned again from their start: more work, no data lost.",
}

TopicPartition = tuple[str, int]
ConfigSource = Callable[[str], "LogConfig | Mapping[str, object] | None"]


class LogManager:
    """Opens, creates, deletes, checkpoints, retains and flushes partition logs."""

    def __init__(self, log_dirs: Sequence[str],
                 default_config: LogConfig | Mapping[str, object] | None = None, *,
                 topic_config: ConfigSource | None = None, fs: FileSystem = DEFAULT_FS,
                 time_ms: Callable[[], int] = wall_clock_ms,
                 rng: random.Random | None = None) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required (log.dirs)")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        if isinstance(default_config, LogConfig):
            self.default_config = default_config
        else:
            self.default_config = LogConfig.from_dict(default_config or {})
        self._topic_config = topic_config
        self._fs = fs
        self._time_ms = time_ms
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._pending_dir_deletes: list[tuple[int, str]] = []
        self.had_clean_shutdown: dict[str, bool] = {}
        # Cleaner state: first dirty offset per compacted partition (cleaner-offset-checkpoint)
        # and the earliest tombstone delete horizon seen by the last pass.
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._tombstone_horizons: dict[TopicPartition, int] = {}
        self._cleaner_lock = threading.Lock()
        self.health: DiskHealth = DISK_HEALTH

    # -- config ------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        if self._topic_config is None:
            return self.default_config
        got = self._topic_config(topic)
        if got is None:
            return self.default_config
        if isinstance(got, LogConfig):
            return got
        return self.default_config.updated(got)

    def update_topic_config(self, topic: str,
                            config: LogConfig | Mapping[str, object] | None = None) -> None:
        """Re-apply a topic's config to its open logs (after AlterConfigs)."""
        cfg = self.config_for(topic) if config is None else config
        for lg in self.all_logs():
            if lg.topic == topic:
                lg.update_config(cfg)

    # -- startup -----------------------------------------------------------------------
    def startup(self, workers: int = 1) -> LoadStats:
        """Load every partition log of every log dir (recovering after a crash).

        With ``workers`` > 1 logs are loaded by a thread pool (one log per task). The clean
        shutdown marker of a dir is removed only after all its logs are loaded.
        """
        total = LoadStats()
        jobs = []
        for log_dir in self.log_dirs:
            self._fs.makedirs(log_dir)
            clean = self._fs.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER))
            self.had_clean_shutdown[log_dir] = clean
            recovery = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            starts = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            hws = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            self._cleaner_offsets.update(self._read_checkpoint(log_dir, CLEANER_OFFSET_CHECKPOINT))
            for name in sorted(self._fs.listdir(log_dir)):
                path = os.path.join(log_dir, name)
                if not self._fs.isdir(path):
                    continue
                if is_delete_dir(name):
                    self._pending_dir_deletes.append((self._time_ms(), path))
                    continue
                tp = parse_partition_dir(name)
                if tp is None:
                    continue
                jobs.append((log_dir, path, tp, clean, recovery.get(tp, 0), starts.get(tp, 0),
                             hws.get(tp, 0)))

        def load(job: tuple) -> tuple[TopicPartition, str, Log, LoadStats]:
            log_dir, path, tp, clean, rp, start, hw = job
            stats = LoadStats()
            lg = load_log(path, self.config_for(tp[0]), topic=tp[0], partition=tp[1],
                          fs=self._fs, time_ms=self._time_ms, clean_shutdown=clean,
                          recovery_point=rp, log_start_offset=start, high_watermark=hw,
                          rng=self._rng, stats=stats)
            return tp, log_dir, lg, stats

        if workers > 1 and len(jobs) > 1:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="log-load") as ex:
                results = list(ex.map(load, jobs))
        else:
            results = [load(job) for job in jobs]
        for tp, log_dir, lg, stats in results:
            if tp in self._logs:
                raise KafkaStorageError(
                    f"partition {tp[0]}-{tp[1]} exists in both {self._dir_of[tp]} and {log_dir}; "
                    "remove the stale copy"
                )
            self._logs[tp] = lg
            self._dir_of[tp] = log_dir
            total.add(stats)
        for log_dir in self.log_dirs:
            marker = os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)
            if self._fs.exists(marker):
                self._fs.remove(marker)
        return total

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        """One offset checkpoint of a log dir.

        A malformed file is never dropped silently. If ignoring it only costs work (the
        recovery point: every segment is CRC-checked; cleaner offsets: compacted logs are
        cleaned again) it is logged as an error naming the line, and the start goes on, as
        Kafka does. If ignoring it could change what clients read (log start offsets: deleted
        records would come back; high watermarks) the start stops, as Kafka's CheckpointFile
        does when it throws and takes the log dir offline.
        """
        path = os.path.join(log_dir, name)
        try:
            return read_offset_checkpoint(self._fs, path)
        except MalformedCheckpoint as exc:
            if name in _CHECKPOINTS_SAFE_TO_RESET:
                log.error("%s. Ignoring the whole file: %s The next checkpoint (within "
                          "seconds) rewrites it.", exc, _CHECKPOINT_FIX[name])
                return {}
            raise LogDirError(
                f"Cannot load the logs in {log_dir}: {exc}. {_CHECKPOINT_FIX[name]} "
                f"The broker stops here rather than guess; nothing was changed on disk."
            ) from exc
        except OSError as exc:
            raise LogDirError(
                f"Cannot read the checkpoint file {path}: {exc.strerror or exc}. Check the "
                f"file's permissions and the disk.", exc.errno
            ) from exc

    # -- logs --------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def _pick_dir(self) -> str:
        counts = dict.fromkeys(self.log_dirs, 0)
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        return min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def get_or_create_log(self, topic: str, partition: int,
                          config: LogConfig | Mapping[str, object] | None = None,
                          topic_id: str | None = None, *, sync: bool = True) -> Log:
        """The log of a partition, created empty in the emptiest log dir if it is new.

        With ``sync=False`` the new directory entries are not fsynced here; the caller does
        it once for many logs (:meth:`create_logs`). A log that cannot be created leaves
        nothing behind and raises :class:`KafkaStorageError` naming the dir and the cause.
        """
        tp = (topic, partition)
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if config is None:
                cfg = self.config_for(topic)
            elif isinstance(config, LogConfig):
                cfg = config
            else:
                cfg = self.config_for(topic).updated(config)
            log_dir = self._pick_dir()
            path = os.path.join(log_dir, partition_dir_name(topic, partition))
            was_there = self._fs.exists(path)
            try:
                lg = load_log(path, cfg, topic=topic, partition=partition, fs=self._fs,
                              time_ms=self._time_ms, rng=self._rng)
                try:
                    if topic_id is not None:
                        write_partition_metadata(self._fs, path, topic_id, sync=sync)
                    if sync:
                        self._fs.fsync_dir(log_dir)
                except BaseException:
                    lg.close_handles()
                    raise
            except OSError as exc:
                if not was_there:
                    self._fs.rmtree(path)
                self.health.failed(log_dir, f"creating {path}", exc)
                raise KafkaStorageError(
                    f"Cannot create the log of {topic}-{partition} in {log_dir}: "
                    f"{exc.strerror or exc}. {advice(exc)}") from exc
            self._logs[tp] = lg
            self._dir_of[tp] = log_dir
            if self.health.failing:
                self.health.succeeded(log_dir)
            return lg

    def create_logs(self, specs: Sequence[tuple[str, int, LogConfig | None, str | None]], *,
                    atomic: bool = False) -> list[Log]:
        """Open or create many logs ``(topic, partition, config, topic_id)`` with one fsync per
        log dir instead of three per log: a 50-partition topic is created in tens of
        milliseconds, not a second. A crash before the fsync loses at most empty new logs,
        which the broker recreates from the metadata log.

        Refuses (:class:`KafkaStorageError`, nothing created) when the new logs would leave
        too few file descriptors (:meth:`check_descriptors`). With ``atomic`` a failure
        removes the logs this call created, so either all exist afterwards or none."""
        with self._lock:
            new = sum(1 for t, p, _c, _i in specs if (t, p) not in self._logs)
        self.check_descriptors(new)
        logs: list[Log] = []
        created: list[Log] = []
        try:
            for t, p, c, i in specs:
                existed = (t, p) in self._logs
                lg = self.get_or_create_log(t, p, c, topic_id=i, sync=False)
                logs.append(lg)
                if not existed:
                    created.append(lg)
            for log_dir in {self._dir_of[(lg.topic, lg.partition)] for lg in logs}:
                try:
                    self._fs.fsync_dir(log_dir)
                except OSError as exc:
                    self.health.failed(log_dir, f"syncing {log_dir}", exc)
                    raise KafkaStorageError(
                        f"Cannot sync the log dir {log_dir}: {exc.strerror or exc}. "
                        f"{advice(exc)}") from exc
        except KafkaStorageError:
            if atomic:
                self.discard_logs(created)
            raise
        return logs

    def discard_logs(self, logs: Sequence[Log]) -> None:
        """Close and remove at once logs just created that must not exist after all (their
        creation was part of a change that failed). Best effort: what cannot be removed is a
        stray log, deleted at the next start."""
        for lg in logs:
            tp = (lg.topic, lg.partition)
            with self._lock:
                if self._logs.get(tp) is not lg:
                    continue
                del self._logs[tp]
                self._dir_of.pop(tp, None)
            lg.close_handles()
            self._fs.rmtree(lg.dir)

    def check_descriptors(self, new_logs: int) -> None:
        """Raise :class:`KafkaStorageError` if ``new_logs`` more partitions (one descriptor
        each) would leave fewer than the reserve of file descriptors free, counting the pool
        of older segments as full. Topic creation fails cleanly here instead of half-way with
        ``Too many open files``."""
        if new_logs <= 0:
            return
        soft, _hard = open_file_limit()
        in_use = open_descriptors()
        keep = reserve(soft)
        pool = HANDLE_POOL.capacity
        if in_use is None:
            raise KafkaStorageError(
                f"Cannot create {new_logs} partition log(s): the broker has no file descriptor "
                f"left (RLIMIT_NOFILE soft limit {soft}). {advice(OSError(errno.EMFILE, ''))}")
        need = in_use - len(HANDLE_POOL) + pool + keep + new_logs
        if need > soft:
            room = max(soft - (in_use - len(HANDLE_POOL) + pool + keep), 0)
            raise KafkaStorageError(
                f"Cannot create {new_logs} partition log(s): each needs a file descriptor, and "
                f"room is left for about {room}. The broker has {in_use} open, keeps up to "
                f"{pool} for older segments and {keep} free for connections, and its open-file "
                f"limit (RLIMIT_NOFILE) is {soft}. Raise the limit (ulimit -n, LimitNOFILE= in "
                f"a systemd unit, --ulimit nofile= for Docker) and restart the broker, or "
                f"create fewer partitions. Nothing was created.")

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log, rename its dir to ``...-delete`` and remove it after
        ``file.delete.delay.ms``. False if there is no such log."""
        tp = (topic, partition)
        with self._lock:
            lg = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
        if lg is None or log_dir is None:
            return False
        lg.close_handles()
        self._cleaner_offsets.pop(tp, None)
        self._tombstone_horizons.pop(tp, None)
        target = os.path.join(log_dir, delete_dir_name(topic, partition))
        self._fs.rename(lg.dir, target)
        self._fs.fsync_dir(log_dir)
        due = self._time_ms() + lg.config.file_delete_delay_ms
        with self._lock:
            self._pending_dir_deletes.append((due, target))
        return True

    # -- periodic work -------------------------------------------------------------------
    def run_retention(self, now_ms: int | None = None) -> int:
        """Retention for every log, then removal of files whose delete delay passed.
        Returns the number of segments deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        deleted = 0
        for lg in self.all_logs():
            try:
                deleted += lg.delete_old_segments(now)
            except KafkaStorageError:
                log.exception("retention failed for %s", lg)
        self.remove_deleted(now)
        return deleted

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        now = self._time_ms() if now_ms is None else now_ms
        return sum(lg.remove_expired_producers(now) for lg in self.all_logs())

    def remove_deleted(self, now_ms: int | None = None, *, force: bool = False) -> None:
        """Remove ``.deleted`` segment files and ``-delete`` dirs whose delay has passed."""
        now = self._time_ms() if now_ms is None else now_ms
        for lg in self.all_logs():
            if force or lg.has_pending_deletes:
                lg.remove_deleted_files(now, force=force)
        with self._lock:
            due = [p for t, p in self._pending_dir_deletes if force or t <= now]
            self._pending_dir_deletes = [(t, p) for t, p in self._pending_dir_deletes
                                         if not (force or t <= now)]
        for path in due:
            self._fs.rmtree(path)

    def deletions_due(self, now_ms: int | None = None) -> bool:
        """Whether a deleted log dir or segment file waits for removal and its
        ``file.delete.delay.ms`` has passed (cheap: the broker asks every second)."""
        now = self._time_ms() if now_ms is None else now_ms
        if any(due <= now for due, _path in list(self._pending_dir_deletes)):
            return True
        return any(lg.deletion_due(now) for lg in self.all_logs() if lg.has_pending_deletes)

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush logs whose ``flush.ms`` passed or that rolled a segment; returns how many."""
        now = self._time_ms() if now_ms is None else now_ms
        flushed = 0
        for lg in self.all_logs():
            try:
                flushed += lg.flush_due(now)
            except KafkaStorageError as exc:
                # Logged once per dir while it lasts, not a traceback per log per second.
                log_dir = self._dir_of.get((lg.topic, lg.partition))
                if log_dir is not None:
                    self.health.failed(log_dir, f"flushing {lg.dir}", exc.__cause__ or exc)
        return flushed

    def clean_logs(self, now_ms: int | None = None, *, force: bool = False
                   ) -> dict[TopicPartition, CleanResult]:
        """One compaction pass over each ``cleanup.policy=compact`` log that needs it (dirty
        ratio >= ``min.cleanable.dirty.ratio``, a tombstone horizon passed, or ``force``).

        Blocking and meant for a worker thread; one pass runs at a time. Appends and reads
        proceed meanwhile (see :mod:`moldau.storage.cleaner`).
        """
        now = self._time_ms() if now_ms is None else now_ms
        results: dict[TopicPartition, CleanResult] = {}
        with self._cleaner_lock:
            with self._lock:
                items = [(tp, lg) for tp, lg in self._logs.items() if lg.config.compact]
            for tp, lg in items:
                first_dirty = self._cleaner_offsets.get(tp, 0)
                horizon = self._tombstone_horizons.get(tp)
                if horizon is not None and now >= horizon:
                    first_dirty = 0  # a full pass can drop tombstones whose horizon passed
                elif not force and dirty_ratio(lg, first_dirty, now) < \
                        lg.config.min_cleanable_dirty_ratio:
                    continue
                try:
                    res = clean_log(lg, now, first_dirty)
                except (OSError, KafkaStorageError):
                    log.exception("cleaning %s failed", lg)
                    continue
                results[tp] = res
                if res.cleaned:
                    self._cleaner_offsets[tp] = res.first_dirty_offset
                    if res.next_horizon_ms is None:
                        self._tombstone_horizons.pop(tp, None)
                    else:
                        self._tombstone_horizons[tp] = res.next_horizon_ms
            if results:
                self._write_cleaner_checkpoints()
        return results

    def _write_cleaner_checkpoints(self) -> None:
        by_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        with self._lock:
            for tp, offset in self._cleaner_offsets.items():
                d = self._dir_of.get(tp)
                if d is not None:
                    by_dir[d][tp] = offset
        for log_dir, offsets in by_dir.items():
            write_offset_checkpoint(self._fs, os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT),
                                    offsets)

    def checkpoint_all(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints of every dir."""
        by_dir: dict[str, list[tuple[TopicPartition, Log]]] = {d: [] for d in self.log_dirs}
        with self._lock:
            for tp, lg in self._logs.items():
                by_dir[self._dir_of[tp]].append((tp, lg))
        for log_dir, items in by_dir.items():
            try:
                self._write_checkpoints(log_dir, items)
            except OSError as exc:
                # Logged once per dir (not a traceback every 5 s while a disk is full); the
                # previous checkpoint stays in place, and the next attempt retries.
                self.health.failed(log_dir, f"writing the checkpoint files of {log_dir}", exc)

    def _write_checkpoints(self, log_dir: str, items: list[tuple[TopicPartition, Log]]) -> None:
        write_offset_checkpoint(self._fs, os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT),
                                {tp: lg.recovery_point for tp, lg in items})
        write_offset_checkpoint(self._fs, os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT),
                                {tp: lg.log_start_offset for tp, lg in items})
        write_offset_checkpoint(self._fs, os.path.join(log_dir, REPLICATION_OFFSET_CHECKPOINT),
                                {tp: lg.high_watermark for tp, lg in items})

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush every log, snapshot producer state, write checkpoints and, in each dir whose
        logs all closed cleanly, the ``.kafka_cleanshutdown`` marker."""
        with self._lock:
            items = list(self._logs.items())
        failed_dirs: set[str] = set()
        for tp, lg in items:
            try:
                if lg.offline:
                    raise KafkaStorageError(f"{lg} is offline")
                lg.flush()
            except KafkaStorageError as exc:
                failed_dirs.add(self._dir_of[tp])
                log.error("flush at shutdown failed for %s: %s", lg, exc.message)
        by_dir: dict[str, list[tuple[TopicPartition, Log]]] = {d: [] for d in self.log_dirs}
        for tp, lg in items:
            by_dir[self._dir_of[tp]].append((tp, lg))
        for tp, lg in items:
            try:
                lg.close()
            except (OSError, KafkaStorageError) as exc:
                failed_dirs.add(self._dir_of[tp])
                self.health.failed(self._dir_of[tp], f"closing {lg.dir}", exc)
        for log_dir, dir_items in by_dir.items():
            try:
                self._write_checkpoints(log_dir, dir_items)
                if log_dir not in failed_dirs:
                    write_clean_shutdown_marker(self._fs, log_dir, broker_epoch)
            except OSError as exc:
                # No marker: the next start recovers this dir's logs, which is what an
                # unfinished shutdown needs.
                self.health.failed(log_dir, f"writing the checkpoints of {log_dir}", exc)
                log.error("shutdown of log dir %s is not clean (%s): the next start recovers "
                          "its logs", log_dir, exc)
        self.remove_deleted(force=False)
        with self._lock:
            self._logs.clear()
            self._dir_of.clear()
