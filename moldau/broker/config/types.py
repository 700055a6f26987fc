"""Config value types and validators, as pure functions.

Every parser raises :class:`ConfigError` with a message that names the key, the bad value and
what is expected, because that message is what a user sees when start-up fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says which and how to fix it."""


def bad(key: str, value: object, expected: str) -> ConfigError:
    return ConfigError(f"Invalid value {value!r} for configuration {key}: {expected}")


def parse_int(key: str, raw: str, *, long: bool = False) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise bad(key, raw, "expected a whole number") from None
    limit = LONG_MAX if long else INT_MAX
    if not -limit - 1 <= value <= limit:
        raise bad(key, raw, f"expected a number between {-limit - 1} and {limit}")
    return value


def parse_bool(key: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise bad(key, raw, "expected true or false")


def parse_double(key: str, raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        raise bad(key, raw, "expected a decimal number") from None


def parse_list(key: str, raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


Validator = Callable[[str, Any], None]


def at_least(minimum: int | float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise bad(key, value, f"must be at least {minimum}")

    return check


def between(lo: int | float, hi: int | float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and not lo <= value <= hi:
            raise bad(key, value, f"must be between {lo} and {hi}")

    return check


def one_of(*choices: str, case_sensitive: bool = False) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        allowed = choices if case_sensitive else [c.lower() for c in choices]
        for item in items:
            probe = item if case_sensitive else str(item).lower()
            if probe not in allowed:
                raise bad(key, value, f"must be one of {', '.join(choices)}")

    return check


@dataclass(frozen=True)
class ConfigDef:
    """One configuration key: how to parse it, its default, and what it means."""

    name: str
    type: str  # int, long, bool, double, string, list, password
    default: Any
    doc: str
    validators: Sequence[Validator] = ()
    kafka: str = "same"  # how it relates to Kafka's key of the same name
    nullable: bool = False

    def parse(self, raw: str | None) -> Any:
        """Parse and validate a raw string; None or empty (for nullable keys) means null."""
        if raw is None or (self.nullable and raw.strip() == ""):
            value: Any = None
        else:
            match self.type:
                case "int":
                    value = parse_int(self.name, raw)
                case "long":
                    value = parse_int(self.name, raw, long=True)
                case "bool":
                    value = parse_bool(self.name, raw)
                case "double":
                    value = parse_double(self.name, raw)
                case "list":
                    value = parse_list(self.name, raw)
                case _:
                    value = raw.strip()
        for validator in self.validators:
            validator(self.name, value)
        return value

    def default_value(self) -> Any:
        if self.default is None:
            return None
        if isinstance(self.default, str):
            return self.parse(self.default)
        return self.default
