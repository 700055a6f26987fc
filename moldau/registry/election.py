"""Primary election of registry instances through a Kafka group, as Confluent's Schema
Registry (and Karapace) elect theirs.

Every instance joins the group ``schema.registry.group.id`` (default ``schema-registry``)
with protocol type ``sr`` and one protocol, ``v0``, whose metadata is the instance's identity
as JSON (Confluent's SchemaRegistryIdentity)::

    {"version": 1, "host": "reg-1", "port": 8081, "master_eligibility": true,
     "scheme": "http"}

The group leader (any member the coordinator picks; not necessarily the primary) chooses the
primary: among members with ``master_eligibility`` (``leader.eligibility``), the one whose
URL ``scheme://host:port`` sorts first. Every member gets the same assignment (Confluent's
SchemaRegistryProtocol.Assignment)::

    {"version": 1, "error": 0, "master": "<member id>", "master_identity": {...}}

``master``/``master_identity`` are left out when no member is eligible (Confluent answers no
error then: reads work, writes get 50004 "unknown leader"); ``error`` is 1
(DUPLICATE_URLS) when two members advertise the same URL (set ``host.name`` per instance),
and such an assignment names no usable primary here.

A rebalance starting forgets the primary (Confluent's non-sticky election); the instance
named primary reads ``_schemas`` to its end (the ``catch_up`` callable: the store's
wait-caught-up) before :attr:`PrimaryElection.is_primary` turns true, so it allocates ids
only after seeing every id the previous primary wrote. Left out: Confluent's optional
sticky election (``leader.election.sticky``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from moldau.client.cluster import Cluster
from moldau.client.config import parse_config
from moldau.client.group.background import BackgroundMember
from moldau.client.group.engine import Joined, JoinedMember, JoinSettings
from moldau.client.tasks import cancel_and_wait

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "sr"
SUBPROTOCOL = "v0"
DEFAULT_GROUP_ID = "schema-registry"
IDENTITY_VERSION = 1
ASSIGNMENT_VERSION = 1
NO_ERROR = 0
DUPLICATE_URLS = 1

Listener = Callable[["PrimaryElection"], Any]


@dataclass(frozen=True, slots=True)
class Identity:
    """How an instance is reached by the others (and whether it may be primary)."""

    host: str
    port: int
    scheme: str = "http"
    eligible: bool = True
    version: int = IDENTITY_VERSION

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6 literal
        return f"{self.scheme}://{host}:{self.port}"

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "host": self.host, "port": self.port,
                "master_eligibility": self.eligible, "scheme": self.scheme}

    def to_json(self) -> bytes:
        """The JoinGroup metadata (Confluent's field names)."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Identity:
        """Read an identity; ``leader_eligibility`` is accepted for ``master_eligibility``
        and ``scheme`` defaults to http (Confluent's default). Raises ValueError."""
        try:
            host, port = data["host"], data["port"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"identity without {exc}") from exc
        eligible = data.get("master_eligibility", data.get("leader_eligibility", False))
        scheme = data.get("scheme") or "http"
        version = data.get("version", IDENTITY_VERSION)
        if not isinstance(host, str) or not host or not isinstance(port, int) \
                or isinstance(port, bool) or not isinstance(eligible, bool) \
                or not isinstance(scheme, str) or not isinstance(version, int):
            raise ValueError(f"malformed identity {dict(data)!r}")
        return cls(host, port, scheme, eligible, version)

    @classmethod
    def from_json(cls, raw: bytes) -> Identity:
        return cls.from_dict(_json_object(raw, "identity"))

    @classmethod
    def for_listener(cls, listener: str, *, host_name: str | None = None,
                     eligible: bool = True) -> Identity:
        """The identity of an instance serving ``listener`` (``http://HOST:PORT``, the
        port actually bound): ``host_name`` (Confluent's ``host.name``) when given, else
        the listener's host unless it is a wildcard, else this machine's name."""
        parts = urlsplit(listener)
        if parts.scheme not in ("http", "https") or parts.port is None:
            raise ValueError(f"listener {listener!r} is not http(s)://HOST:PORT")
        host = host_name or parts.hostname or ""
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        return cls(host, parts.port, parts.scheme, eligible)


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    """``raw`` as a JSON object; ValueError naming ``what`` otherwise."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{what} is not a JSON object: {data!r}")
    return data


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the group leader hands every member: the primary (or none) and an error."""

    error: int = NO_ERROR
    primary_member: str | None = None
    primary: Identity | None = None
    version: int = ASSIGNMENT_VERSION

    def to_json(self) -> bytes:
        data: dict[str, Any] = {"version": self.version, "error": self.error}
        if self.primary_member is not None and self.primary is not None:
            data["master"] = self.primary_member
            data["master_identity"] = self.primary.to_dict()
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Assignment:
        """Read an assignment (also Karapace's); raises ValueError when malformed."""
        data = _json_object(raw, "assignment")
        error = data.get("error", NO_ERROR)
        member = data.get("master")
        identity = data.get("master_identity")
        if not isinstance(error, int) or (member is not None and not isinstance(member, str)):
            raise ValueError(f"malformed assignment {data!r}")
        primary = Identity.from_dict(identity) if isinstance(identity, dict) else None
        return cls(error, member if primary is not None else None, primary,
                   data.get("version", ASSIGNMENT_VERSION))


def choose_primary(members: Mapping[str, Identity]) -> Assignment:
    """The leader's choice: the eligible member with the lowest URL; DUPLICATE_URLS when
    two members advertise the same URL; no primary when none is eligible."""
    urls = [identity.url for identity in members.values()]
    error = DUPLICATE_URLS if len(set(urls)) != len(urls) else NO_ERROR
    eligible = sorted((identity.url, member) for member, identity in members.items()
                      if identity.eligible)
    if not eligible:
        return Assignment(error)
    _url, member = eligible[0]
    return Assignment(error, member, members[member])


class PrimaryElection:
    """This instance's view of who the primary is (see module docstring).

    The seam the registry core uses: :attr:`is_primary` (elected *and* caught up: it may
    allocate ids and write), :attr:`primary_url` (where writes go: this instance's URL when
    primary, the elected primary's otherwise, None while unknown or while this instance
    catches up), :meth:`add_listener` (called after every change), :meth:`wait_for_primary`,
    :meth:`start` / :meth:`stop`.
    """

    protocol_type = PROTOCOL_TYPE
    fatal_hints: Mapping[int, str] = {}

    def __init__(self, client_config: Mapping[str, Any], identity: Identity, *,
                 group_id: str = DEFAULT_GROUP_ID,
                 catch_up: Callable[[], Awaitable[Any]] | None = None,
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 300000,
                 heartbeat_interval_ms: int = 3000, init_timeout_ms: int = 60000) -> None:
        """``client_config``: moldau client settings of the registry's Kafka connection
        (``bootstrap.servers``, ``broker.address.map``, timeouts ...). The timeouts are
        Confluent's ``kafkagroup.*`` keys; ``init_timeout_ms`` is
        ``kafkastore.init.timeout.ms`` (how long :meth:`start` waits for the first
        election)."""
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError(
                f"kafkagroup.heartbeat.interval.ms={heartbeat_interval_ms} must be lower "
                f"than kafkagroup.session.timeout.ms={session_timeout_ms}")
        self.identity = identity
        self.group_id = group_id
        self.init_timeout_ms = init_timeout_ms
        self._catch_up = catch_up
        config = parse_config("admin", dict(client_config))
        self.cluster = Cluster(config)
        self.member = BackgroundMember(self.cluster, group_id, self, JoinSettings(
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            request_timeout_ms=config["request.timeout.ms"],
            retry_backoff_ms=config["retry.backoff.ms"],
            retry_backoff_max_ms=config["retry.backoff.max.ms"],
            expire_locally=True,
        ))
        self.is_primary = False
        self.primary: Identity | None = None
        self.assignment: Assignment | None = None
        self.generation = -1
        self._elected = False  # named primary, maybe still catching up
        self._listeners: list[Listener] = []
        self._changed = asyncio.Condition()
        self._assigned_once = asyncio.Event()
        self._promotion: asyncio.Task[None] | None = None

    # --- the seam ---------------------------------------------------------------------------

    @property
    def primary_url(self) -> str | None:
        """Where writes go (None: unknown, or this instance is still catching up)."""
        if self.primary is None or self.catching_up:
            return None
        return self.primary.url

    @property
    def catching_up(self) -> bool:
        """Named primary, still reading the store before it acts (:attr:`primary_url` is
        None meanwhile)."""
        return self._elected and not self.is_primary

    def add_listener(self, listener: Listener) -> None:
        """``listener(election)`` (function or coroutine function) after every change of
        :attr:`is_primary` or :attr:`primary_url`."""
        self._listeners.append(listener)

    async def wait_for_primary(self, timeout: float) -> str | None:
        """The primary's URL, waiting up to ``timeout`` seconds while it is unknown."""
        async with self._changed:
            try:
                async with asyncio.timeout(timeout):
                    await self._changed.wait_for(lambda: self.primary_url is not None)
            except TimeoutError:
                pass
            return self.primary_url

    async def start(self, *, wait: bool = True) -> None:
        """Join the group; with ``wait``, until the first election completed (raises
        TimeoutError after ``init_timeout_ms``, as Confluent's init does)."""
        await self.member.start()
        if not wait:
            return
        try:
            async with asyncio.timeout(self.init_timeout_ms / 1000):
                await self._assigned_once.wait()
        except TimeoutError:
            error = self.member.last_error
            raise TimeoutError(
                f"the schema registry group {self.group_id!r} was not joined within "
                f"kafkastore.init.timeout.ms={self.init_timeout_ms}"
                + (f"; last error: {error}" if error else "")) from error

    async def stop(self) -> None:
        """Leave the group (the others elect a new primary at once) and close."""
        await self.member.stop()
        await cancel_and_wait([self._promotion])
        self._promotion = None
        await self._set(None, elected=False, primary=False)
        await self.cluster.close()

    # --- the group protocol -----------------------------------------------------------------

    async def metadata(self) -> list[tuple[str, bytes]]:
        return [(SUBPROTOCOL, self.identity.to_json())]

    async def assign(self, protocol: str, members: Sequence[JoinedMember]
                     ) -> dict[str, bytes]:
        identities: dict[str, Identity] = {}
        for m in members:
            try:
                identities[m.member_id] = Identity.from_json(m.metadata)
            except ValueError as exc:
                log.warning("schema registry group %s: member %s sent an identity we cannot "
                            "read (%s); it cannot be primary", self.group_id, m.member_id, exc)
        assignment = choose_primary(identities)
        log.info("schema registry group %s: %d member(s) %s; primary: %s", self.group_id,
                 len(members), sorted(i.url for i in identities.values()),
                 assignment.primary.url if assignment.primary else "none eligible")
        raw = assignment.to_json()
        return {m.member_id: raw for m in members}

    async def on_assigned(self, joined: Joined) -> None:
        try:
            assignment = Assignment.from_json(joined.assignment)
        except ValueError as exc:
            log.error("schema registry group %s: unreadable assignment (%s); no primary "
                      "known", self.group_id, exc)
            assignment = Assignment()
        await cancel_and_wait([self._promotion])
        self._promotion = None
        # From here to the view's change in _set() nothing awaits: whoever sees the new
        # generation sees the new view.
        self.assignment = assignment
        self.generation = joined.generation
        self._assigned_once.set()
        if assignment.error == DUPLICATE_URLS:
            log.error("schema registry group %s: several instances advertise the same URL; "
                      "give each a unique, routable host.name / listener (common in "
                      "containers that all call themselves localhost); no primary until "
                      "then", self.group_id)
            await self._set(None, elected=False, primary=False)
            return
        if assignment.error != NO_ERROR:
            log.error("schema registry group %s: assignment error %d; no primary",
                      self.group_id, assignment.error)
            await self._set(None, elected=False, primary=False)
            return
        if assignment.primary is None:
            log.warning("schema registry group %s: no eligible instance (leader.eligibility)"
                        " is in the group: reads work, writes cannot be served",
                        self.group_id)
            await self._set(None, elected=False, primary=False)
            return
        if assignment.primary_member == joined.member_id:
            log.info("schema registry group %s: this instance (%s) is the primary; reading "
                     "the store to its end first", self.group_id, self.identity.url)
            await self._set(assignment.primary, elected=True, primary=False)
            self._promotion = asyncio.get_running_loop().create_task(
                self._promote(joined.generation), name="moldau-registry-promote")
        else:
            log.info("schema registry group %s: the primary is %s", self.group_id,
                     assignment.primary.url)
            await self._set(assignment.primary, elected=False, primary=False)

    async def on_revoked(self) -> None:
        """A rebalance began: no primary until it ends (Confluent's non-sticky election)."""
        await cancel_and_wait([self._promotion])
        self._promotion = None
        await self._set(None, elected=False, primary=False)

    async def on_lost(self) -> None:
        await self.on_revoked()

    # --- internals --------------------------------------------------------------------------

    async def _promote(self, generation: int) -> None:
        """Catch up with the store, then act as primary (retried until it works or the
        election changes)."""
        attempt = 0
        while True:
            try:
                if self._catch_up is not None:
                    await self._catch_up()
                break
            except Exception as exc:
                attempt += 1
                log.warning("schema registry group %s: catching up before acting as primary "
                            "failed (%s); retrying", self.group_id, exc)
                await asyncio.sleep(min(0.1 * 2 ** attempt, 2.0))
        if self.generation == generation and self._elected:
            log.info("schema registry group %s: caught up; acting as primary",
                     self.group_id)
            await self._set(self.primary, elected=True, primary=True)

    async def _set(self, identity: Identity | None, *, elected: bool, primary: bool) -> None:
        """Change the view, wake waiters and tell listeners if something they see changed."""
        before = (self.is_primary, self.primary_url)
        self.primary, self._elected, self.is_primary = identity, elected, primary
        async with self._changed:
            self._changed.notify_all()
        if (self.is_primary, self.primary_url) == before:
            return
        for listener in list(self._listeners):
            try:
                result = listener(self)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("schema registry election listener raised")
