"""The splitter of v3's streaming produce body: concatenated JSON objects cut out of chunks
that break anywhere."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.rest.v3.json_stream import ObjectSplitter, StreamError

RECORDS = [
    {"value": {"type": "STRING", "data": "plain"}},
    {"value": {"type": "STRING", "data": "braces } { and \"quotes\" and \\ backslashes"}},
    {"key": {"type": "JSON", "data": {"nested": {"deep": [1, {"x": "}"}]}}}},
    {"value": {"type": "STRING", "data": "multi-byte: é 中 🙂"}},
    {},
]


def split_all(body: bytes, sizes: list[int], limit: int = 1 << 20) -> list[object]:
    splitter = ObjectSplitter(limit)
    out: list[object] = []
    pos = 0
    for size in sizes:
        out.extend(splitter.feed(body[pos:pos + size]))
        pos += size
    out.extend(splitter.feed(body[pos:]))
    assert splitter.error is None
    splitter.finish()
    return out


def test_whole_body_and_byte_by_byte() -> None:
    body = b"".join(json.dumps(r, ensure_ascii=False).encode() for r in RECORDS)
    assert split_all(body, []) == RECORDS
    assert split_all(body, [1] * len(body)) == RECORDS


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=60), st.sampled_from([b"", b"\n", b" \r\n\t "]))
def test_any_cuts_any_separator(sizes: list[int], separator: bytes) -> None:
    body = separator.join(json.dumps(r, ensure_ascii=False).encode() for r in RECORDS)
    assert split_all(separator + body + separator, sizes) == RECORDS


def test_objects_before_garbage_are_returned_then_the_error() -> None:
    splitter = ObjectSplitter(1000)
    found = splitter.feed(b'{"a":1} {"b":2} [3] {"c":4}')
    assert found == [{"a": 1}, {"b": 2}]
    assert splitter.error is not None and splitter.error.status == 400
    assert "record 3" in str(splitter.error)
    assert splitter.feed(b'{"d":5}') == []
    with pytest.raises(StreamError):
        splitter.finish()


def test_size_limit_per_object() -> None:
    splitter = ObjectSplitter(20)
    assert splitter.feed(b'{"a":"0123456789"}') == [{"a": "0123456789"}]
    assert splitter.feed(b'{"b":"01234567890123456789"}') == []
    assert splitter.error is not None and splitter.error.status == 413
    # an object still open past the limit is refused before it ends
    splitter = ObjectSplitter(20)
    assert splitter.feed(b'{"a":"' + b"x" * 30) == []
    assert splitter.error is not None and splitter.error.status == 413


def test_unfinished_object_at_the_end() -> None:
    splitter = ObjectSplitter(100)
    assert splitter.feed(b'{"a": "open') == []
    with pytest.raises(StreamError, match="not complete"):
        splitter.finish()
    empty = ObjectSplitter(100)
    assert empty.feed(b"  \n") == []
    empty.finish()
    assert empty.objects == 0


def test_memory_is_released_as_objects_complete() -> None:
    splitter = ObjectSplitter(1000)
    for _ in range(1000):
        assert len(splitter.feed(b'{"value": {"type": "STRING", "data": "x"}}\n')) == 1
    assert splitter._text == ""


def test_invalid_objects_are_reported_and_the_stream_goes_on() -> None:
    splitter = ObjectSplitter(1000)
    body = b'{"a": tru} {"b": "}"} {"c": [1,]}{"d": 4}'
    found = [item for i in range(len(body)) for item in splitter.feed(body[i:i + 1])]
    assert [type(f).__name__ for f in found] == ["BadObject", "dict", "BadObject", "dict"]
    assert found[1] == {"b": "}"} and found[3] == {"d": 4}
    assert "record 1" in found[0].message and "record 3" in found[2].message
    splitter.finish()


def test_large_object_in_small_chunks() -> None:
    splitter = ObjectSplitter(1 << 20)
    value = {"data": "x" * 50_000, "nested": [{"k": "v"}] * 1000}
    body = json.dumps(value).encode()
    found = []
    for i in range(0, len(body), 100):
        found.extend(splitter.feed(body[i:i + 100]))
        assert splitter._scan <= len(splitter._text)
    assert found == [value]


def test_not_utf8() -> None:
    splitter = ObjectSplitter(100)
    assert splitter.feed(b'{"a": "\xff"}') == []
    assert splitter.error is not None and "UTF-8" in str(splitter.error)


def test_hostile_json_is_a_bad_object_not_a_crash() -> None:
    splitter = ObjectSplitter(1 << 20)
    deep = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    long_int = b'{"a":' + b"9" * 5000 + b"}"
    found = splitter.feed(deep + long_int + b'{"ok": 1}')
    assert [type(f).__name__ for f in found] == ["BadObject", "BadObject", "dict"]
    assert "nested too deeply" in found[0].message
    assert found[2] == {"ok": 1}
