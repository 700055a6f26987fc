"""``meta.properties`` of each log dir, in Kafka's KRaft format (version 1).

::

    #
    #Tue Jan 02 10:00:00 UTC 2024
    cluster.id=MkU3OEVBNTcwNTJENDM2Qg
    directory.id=J8aAPcfLQt2bqs1JT_rMgQ
    node.id=1
    version=1

Ids are Kafka ``Uuid`` strings: 16 random bytes in URL-safe base64 without padding.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..protocol import properties
from .fs import DEFAULT_FS, FileSystem
from .names import META_PROPERTIES


class MetaPropertiesError(Exception):
    """meta.properties disagrees with the broker config or with the other log dirs."""


def new_uuid() -> str:
    """A random Kafka Uuid string (never starting with '-', as Kafka's Uuid.randomUuid)."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and raw not in (bytes(16), bytes(15) + b"\x01"):
            return text


@dataclass
class MetaProperties:
    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def parse_meta_properties(text: str) -> MetaProperties:
    """Read meta.properties as Kafka does (``Properties.load``)."""
    try:
        props = properties.parse(text)
    except properties.PropertiesError as exc:
        raise MetaPropertiesError(f"meta.properties cannot be read: {exc}") from exc
    meta = MetaProperties()
    try:
        meta.version = int(props.pop("version", "0"))
        node = props.pop("node.id", props.pop("broker.id", None))
        meta.node_id = int(node) if node is not None else None
    except ValueError as exc:
        raise MetaPropertiesError(f"meta.properties has a non-numeric field: {exc}") from None
    meta.cluster_id = props.pop("cluster.id", None)
    meta.directory_id = props.pop("directory.id", None)
    meta.extra = props
    return meta


def format_meta_properties(meta: MetaProperties) -> str:
    """meta.properties as Kafka writes it (``Properties.store`` to a Writer, empty comment)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    props = dict(meta.extra)
    if meta.cluster_id is not None:
        props["cluster.id"] = meta.cluster_id
    if meta.directory_id is not None:
        props["directory.id"] = meta.directory_id
    if meta.node_id is not None:
        props["node.id"] = str(meta.node_id)
    props["version"] = str(meta.version)
    return f"#\n#{stamp}\n{properties.dump(sorted(props.items()))}"


def read_meta_properties(log_dir: str, fs: FileSystem = DEFAULT_FS) -> MetaProperties | None:
    path = os.path.join(log_dir, META_PROPERTIES)
    if not fs.exists(path):
        return None
    try:
        return parse_meta_properties(fs.read_file(path).decode("utf-8", "replace"))
    except MetaPropertiesError as exc:
        raise MetaPropertiesError(f"{path}: {exc}") from exc


def write_meta_properties(log_dir: str, meta: MetaProperties,
                          fs: FileSystem = DEFAULT_FS) -> None:
    fs.makedirs(log_dir)
    fs.write_file_atomic(os.path.join(log_dir, META_PROPERTIES),
                         format_meta_properties(meta).encode())


def ensure_meta_properties(log_dirs: Sequence[str], node_id: int, cluster_id: str,
                           fs: FileSystem = DEFAULT_FS) -> dict[str, MetaProperties]:
    """Check (or create) meta.properties in every log dir; returns them by dir.

    Raises :class:`MetaPropertiesError` if a dir belongs to another node or cluster, or two
    dirs share a directory id (a copied dir), with a message saying what to fix.
    """
    out: dict[str, MetaProperties] = {}
    seen_ids: dict[str, str] = {}
    for log_dir in log_dirs:
        meta = read_meta_properties(log_dir, fs)
        path = os.path.join(log_dir, META_PROPERTIES)
        if meta is None:
            meta = MetaProperties(1, cluster_id, node_id, new_uuid())
            write_meta_properties(log_dir, meta, fs)
        else:
            if meta.version not in (0, 1):
                raise MetaPropertiesError(f"{path} has unsupported version {meta.version}")
            if meta.node_id is not None and meta.node_id != node_id:
                raise MetaPropertiesError(
                    f"{path} says node.id={meta.node_id} but this broker is node.id={node_id}; "
                    "point log.dirs at this node's directories or fix node.id"
                )
            if meta.cluster_id is not None and meta.cluster_id != cluster_id:
                raise MetaPropertiesError(
                    f"{path} belongs to cluster {meta.cluster_id}, not {cluster_id}; the log "
                    "dir was formatted for another cluster (InconsistentClusterIdException)"
                )
            if meta.directory_id is None or meta.version == 0:
                meta = MetaProperties(1, cluster_id, node_id, meta.directory_id or new_uuid(),
                                      meta.extra)
                write_meta_properties(log_dir, meta, fs)
        assert meta.directory_id is not None
        if meta.directory_id in seen_ids:
            raise MetaPropertiesError(
                f"{log_dir} and {seen_ids[meta.directory_id]} have the same directory.id "
                f"{meta.directory_id}; one is a copy of the other — give it a new directory.id"
            )
        seen_ids[meta.directory_id] = log_dir
        out[log_dir] = meta
    return out
