"""Checking a log dir before anything is loaded from it (Kafka's createAndValidateLogDirs).

Every failure raises :class:`moldau.storage.errors.LogDirError` with the config key the dir
came from (``log.dirs`` or ``log.dir``), the path, what is wrong and what to do, instead of a
bare ``File exists`` or ``Read-only file system``.
"""

from __future__ import annotations

import errno
import os

from .errors import LogDirError

_PROBE = ".moldau-write-probe"


def _first_non_directory(path: str) -> str | None:
    """The nearest existing ancestor of ``path`` (or ``path``) that is not a directory."""
    current = os.path.abspath(path)
    chain = []
    while True:
        chain.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for candidate in reversed(chain):
        if os.path.lexists(candidate) and not os.path.isdir(candidate):
            return candidate
    return None


def _explain(path: str, key: str, exc: OSError, doing: str) -> LogDirError:
    code = exc.errno
    reason = exc.strerror or str(exc)
    if code == errno.EROFS:
        fix = f"Remount it read-write, or point {key} at a writable directory."
    elif code in (errno.EACCES, errno.EPERM):
        fix = (f"Give the user running the broker (uid {os.getuid()}) write access to it, or "
               f"point {key} at a directory that user owns.")
    elif code == errno.ENOSPC:
        fix = "Free some space on that file system, or point the key at another disk."
    elif code in (errno.ENOTDIR, errno.EEXIST):
        blocker = _first_non_directory(path)
        if blocker == os.path.abspath(path):
            return LogDirError(
                f"{key} names {path}, which is a file, not a directory. Point {key} at a "
                f"directory (it is created if missing), or move the file away.", code)
        where = blocker or "a parent"
        return LogDirError(
            f"Cannot create the log dir {path} (from {key}): {where} is a file, not a "
            f"directory. Point {key} at a path whose parents are directories.", code)
    else:
        fix = f"Check the path and the disk, or point {key} at another directory."
    return LogDirError(f"Cannot {doing} the log dir {path} (from {key}): {reason}. {fix}", code)


def prepare_log_dir(path: str, key: str) -> None:
    """Create ``path`` if needed and check that files can be created in it."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise _explain(path, key, exc, "create") from exc
    if not os.path.isdir(path):
        raise _explain(path, key, FileExistsError(errno.EEXIST, "File exists"), "use")
    probe = os.path.join(path, _PROBE)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0),
                     0o644)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise _explain(path, key, exc, "write to") from exc
