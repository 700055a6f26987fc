"""What a member subscribes to: a set of topic names or a regular expression."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..cluster import Cluster


@dataclass(frozen=True)
class TopicSubscription:
    """Topic names, or a pattern matched against whole topic names (internal topics such
    as ``__consumer_offsets`` excluded, as ``exclude.internal.topics=true`` does)."""

    names: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, topics: Iterable[str] | str | re.Pattern[str]) -> TopicSubscription:
        """Names, a compiled pattern, or librdkafka's convention: a name starting with ``^``
        is a regular expression (only one pattern is allowed)."""
        if isinstance(topics, re.Pattern):
            return cls(pattern=topics)
        items = [topics] if isinstance(topics, str) else list(topics)
        patterns = [t for t in items if t.startswith("^")]
        names = frozenset(t for t in items if not t.startswith("^"))
        if patterns:
            if len(patterns) > 1 or names:
                raise ValueError(
                    "subscribe() takes topic names or one regular expression (a name starting "
                    f"with '^'), not a mix: {items}"
                )
            try:
                return cls(pattern=re.compile(patterns[0]))
            except re.error as exc:
                raise ValueError(f"bad topic pattern {patterns[0]!r}: {exc}") from None
        for name in names:
            if not name or not name.strip():
                raise ValueError(f"bad topic name {name!r} in subscribe()")
        return cls(names=names)

    @property
    def is_pattern(self) -> bool:
        return self.pattern is not None

    @property
    def regex(self) -> str | None:
        """The pattern as text (for KIP-848's ``subscribed_topic_regex``)."""
        return self.pattern.pattern if self.pattern is not None else None

    def matches(self, topic: str) -> bool:
        if self.pattern is None:
            return topic in self.names
        return self.pattern.fullmatch(topic) is not None

    def resolve(self, cluster: Cluster) -> set[str]:
        """The topics to ask for: the names, or the known topics the pattern matches."""
        if self.pattern is None:
            return set(self.names)
        return {
            name for name, info in cluster.topics.items()
            if not info.is_internal and not name.startswith("__")
            and self.pattern.fullmatch(name) is not None
        }
