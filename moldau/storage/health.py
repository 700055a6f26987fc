"""Write failures per log dir, logged once until the dir works again.

A full disk fails every append to every partition of a log dir; logging each failure would
flood the log, and logging none (as before) left a user with clients reporting
KAFKA_STORAGE_ERROR and nothing in the broker's log. :class:`DiskHealth` logs the first failure
of a dir as an error naming the path and the cause, stays quiet while it lasts, and logs once
more when a write to that dir succeeds again.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading

log = logging.getLogger(__name__)


def advice(exc: BaseException) -> str:
    """What a user can do about ``exc`` (an OSError from the log dirs), in one sentence."""
    code = getattr(exc, "errno", None)
    if code == errno.ENOSPC or code == errno.EDQUOT:
        return ("The file system is full: free space on it (or lower retention.ms / "
                "retention.bytes, or add a log dir to log.dirs); writes resume by themselves "
                "once there is room.")
    if code in (errno.EMFILE, errno.ENFILE):
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return (f"The broker has run out of file descriptors (its RLIMIT_NOFILE soft limit is "
                f"{soft}): raise the limit (ulimit -n, LimitNOFILE= in a systemd unit, "
                f"--ulimit nofile= for Docker) and restart, or host fewer partitions.")
    if code == errno.EROFS:
        return "The file system is read-only: remount it read-write."
    if code in (errno.EACCES, errno.EPERM):
        return "Permission denied: give the broker's user write access to the log dir."
    if code == errno.EIO:
        return "The disk reports I/O errors: check it (dmesg, SMART) before trusting it again."
    return "Check the disk and the log dir."


class DiskHealth:
    """Which log dirs currently fail writes; logs each change once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failing: dict[str, str] = {}

    def failed(self, log_dir: str, what: str, exc: BaseException) -> None:
        """A write to ``log_dir`` failed (``what`` names the file or action)."""
        with self._lock:
            if log_dir in self.failing:
                return
            self.failing[log_dir] = str(exc)
        log.error("Writes to log dir %s are failing: %s (%s). Until this is fixed, produce "
                  "requests to its partitions are answered KAFKA_STORAGE_ERROR and topics "
                  "cannot be created. %s (Logged once; a message follows when writes succeed "
                  "again.)", log_dir, getattr(exc, "strerror", None) or exc, what, advice(exc))

    def succeeded(self, log_dir: str) -> None:
        """A write to ``log_dir`` worked; cheap when nothing is failing."""
        if not self.failing:
            return
        with self._lock:
            cause = self.failing.pop(log_dir, None)
        if cause is not None:
            log.info("Writes to log dir %s work again (they had failed with: %s)", log_dir,
                     cause)


def log_dir_of(partition_dir: str) -> str:
    """The log dir holding a partition dir."""
    return os.path.dirname(os.path.abspath(partition_dir))


DISK_HEALTH = DiskHealth()
