"""A thin filesystem seam over ``os`` so tests can inject failures and torn writes.

Everything in :mod:`moldau.storage` touches the disk through a :class:`FileSystem`. The default
implementation is a direct pass-through to ``os`` functions on raw file descriptors (no Python
buffered file objects on the hot path). Fault tests subclass it and override single methods,
for example :meth:`FileSystem.pwrite` to write half a batch and then raise ``OSError``.
"""

from __future__ import annotations

import mmap
import os
import shutil

# Flags for the files the log writes: raw fds, no O_APPEND (we always write at an explicit
# position so a truncation never leaves the file offset pointing past the end).
RW_CREATE = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
RW_EXISTING = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
READ_ONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
# Buffers per pwritev call (Linux's IOV_MAX is 1024).
_IOV_MAX = 1024


class FileSystem:
    """Pass-through to ``os``. Subclass and override methods to inject faults."""

    # -- descriptors -------------------------------------------------------------------
    def open(self, path: str, flags: int = RW_CREATE, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def dup(self, fd: int) -> int:
        return os.dup(fd)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def map(self, fd: int, length: int) -> mmap.mmap:
        """A read-only shared mapping of the first ``length`` bytes of ``fd``."""
        return mmap.mmap(fd, length, access=mmap.ACCESS_READ)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    # -- paths -------------------------------------------------------------------------
    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        os.remove(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def mtime_ms(self, path: str) -> int:
        return int(os.stat(path).st_mtime * 1000)

    def fsync_dir(self, path: str) -> None:
        """Persist a directory's entries (after create/rename/remove)."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- helpers built on the primitives (so overriding a primitive affects them too) ----
    def write_all(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
        """Write all of ``data`` at ``offset``, looping over short writes."""
        view = memoryview(data)
        done = 0
        total = len(view)
        while done < total:
            n = self.pwrite(fd, view[done:], offset + done)
            if n <= 0:
                raise OSError(f"short write: wrote {done} of {total} bytes")
            done += n

    def write_vectored(self, fd: int, chunks: list[bytes | bytearray | memoryview],
                       offset: int) -> None:
        """Write ``chunks`` back to back at ``offset`` (one ``pwritev`` where possible).

        A subclass that overrides :meth:`pwrite` (fault injection) gets the chunks joined and
        written through it instead, so injected faults apply to vectored writes too.
        """
        if type(self).pwrite is not FileSystem.pwrite:
            self.write_all(fd, b"".join(chunks), offset)
            return
        total = sum(len(c) for c in chunks)
        done = 0
        while done < total:
            n = 0
            batch: list[bytes | bytearray | memoryview] = []
            skip = done
            for c in chunks:  # the chunks not yet fully written (short writes resume)
                if skip >= len(c):
                    skip -= len(c)
                    continue
                batch.append(memoryview(c)[skip:] if skip else c)
                skip = 0
                if len(batch) == _IOV_MAX:
                    break
            n = os.pwritev(fd, batch, offset + done)
            if n <= 0:
                raise OSError(f"short write: wrote {done} of {total} bytes")
            done += n

    def read_file(self, path: str) -> bytes:
        """Read a small file whole."""
        fd = self.open(path, READ_ONLY)
        try:
            size = self.fsize(fd)
            chunks = []
            pos = 0
            while pos < size:
                chunk = self.pread(fd, size - pos, pos)
                if not chunk:
                    break
                chunks.append(chunk)
                pos += len(chunk)
            return b"".join(chunks)
        finally:
            self.close(fd)

    def write_file_atomic(self, path: str, data: bytes, *, sync: bool = True) -> None:
        """Replace ``path`` with ``data`` atomically: temp file, fsync, rename, fsync dir."""
        tmp = path + ".tmp"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
        try:
            try:
                self.write_all(fd, data, 0)
                if sync:
                    self.fsync(fd)
            finally:
                self.close(fd)
            self.rename(tmp, path)
        except OSError:
            # A half-written temp file would hold on to the space a full disk needs back.
            try:
                self.remove(tmp)
            except OSError:
                pass
            raise
        if sync:
            self.fsync_dir(os.path.dirname(path) or ".")


def fsync_handles(fs: FileSystem, fds: list[int], paths: list[str]) -> None:
    """fsync and close duplicated fds, and fsync files by path (missing files are skipped)."""
    try:
        for fd in fds:
            fs.fsync(fd)
    finally:
        for fd in fds:
            fs.close(fd)
    for path in paths:
        try:
            fd = fs.open(path, READ_ONLY)
        except FileNotFoundError:
            continue
        try:
            fs.fsync(fd)
        finally:
            fs.close(fd)


def remove_files(fs: FileSystem, paths: list[str]) -> None:
    for path in paths:
        try:
            fs.remove(path)
        except FileNotFoundError:
            pass


DEFAULT_FS = FileSystem()
