"""Key tables of the HTTP services' settings, shared by the registry
(:mod:`moldau.registry.config`) and the REST proxy (:mod:`moldau.rest.config`).

A :class:`Key` names a setting, its parser (``parse(key, text) -> value``, ConfigError naming
the key), its default and what it does; :func:`read_settings` reads a ``.properties`` file
and applies the command line's overrides. What each service does with the texts (aliases,
client prefixes, required keys) stays in its own module.

It lives in the registry because the REST proxy may import the registry and both need the
client's ConfigError, which :mod:`moldau.http` (which imports nothing of moldau) may not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.client.errors import ConfigError
from moldau.http import ListenerError, parse_listeners
from moldau.protocol import properties


@dataclass(frozen=True)
class Key:
    """One setting: name, parser, default, meaning and the Confluent key it mirrors."""

    name: str
    parse: Callable[[str, str], Any]
    default: Any
    doc: str
    confluent: str = "same key"


def integer(low: int, high: int | None = None) -> Callable[[str, str], int]:
    """A parser of whole numbers from ``low`` (to ``high``)."""

    def parse(key: str, value: str) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{key} must be an integer, not {value!r}") from None
        if number < low or (high is not None and number > high):
            bounds = f"at least {low}" if high is None else f"between {low} and {high}"
            raise ConfigError(f"{key} must be {bounds}, not {number}")
        return number

    return parse


def boolean(key: str, value: str) -> bool:
    """``true`` or ``false`` (any case), as Confluent's ConfigDef reads a BOOLEAN."""
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{key} must be true or false, not {value!r}")


def text(key: str, value: str) -> str:
    return str(value).strip()


def listeners(key: str, value: str) -> str:
    """``http://HOST:PORT[,...]``, checked by :func:`moldau.http.parse_listeners`."""
    try:
        parse_listeners(value, key)
    except ListenerError as exc:
        raise ConfigError(str(exc)) from None
    return str(value).strip()


def read_settings(path: str | Path | None = None,
                  overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The key -> text pairs of a properties file (optional) with ``overrides`` applied;
    ConfigError naming the file when it cannot be read or parsed."""
    raw: dict[str, str] = {}
    if path is not None:
        try:
            content = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            raw.update(properties.parse(content))
        except properties.PropertiesError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    raw.update(overrides or {})
    return raw


def describe_keys(keys: Iterable[Key]) -> list[tuple[str, Any, str]]:
    """(key, default, doc) of every key, for help output and docs."""
    return [(k.name, k.default, k.doc) for k in keys]
