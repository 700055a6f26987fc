"""Error messages in responses are bounded (they quote names of up to 32,767 bytes and more,
which a non-flexible string cannot hold): one helper, applied to every kio-built response's
``error_message`` and by the hand-written Produce encoder."""

from __future__ import annotations

import pytest

from moldau.protocol.encoders.produce import PartitionProduceResult, encode_produce_response
from moldau.protocol.entities import build
from moldau.protocol.errors import MAX_ERROR_MESSAGE, error_message
from moldau.protocol.messages import (
    decode_response,
    encode_response,
    frame_response,
    response_schema,
)

HINT = " Use a name of at most 249 characters."


@pytest.mark.parametrize("size", [0, 10, MAX_ERROR_MESSAGE - len(HINT), MAX_ERROR_MESSAGE,
                                  MAX_ERROR_MESSAGE + 1, 32767, 1_000_000])
def test_error_message_is_bounded_and_keeps_both_ends(size: int) -> None:
    text = "Topic '" + "n" * size + "' is not valid." + HINT
    bounded = error_message(text)
    assert bounded is not None and len(bounded) <= MAX_ERROR_MESSAGE
    if len(text) <= MAX_ERROR_MESSAGE:
        assert bounded == text
    else:
        assert bounded.startswith("Topic 'nnn") and bounded.endswith(HINT)
        cut = int(bounded.split(" [... ")[1].split(" ")[0])
        assert len(bounded) - len(f" [... {cut} characters left out ...] ") + cut == len(text)
    assert error_message(None) is None


def test_kio_built_responses_bound_their_error_messages() -> None:
    schema = response_schema(37, 1)  # CreatePartitions v1: a classic (int16) string
    assert schema is not None
    long = "Topic '" + "p" * 32767 + "' does not exist."
    entity = build(schema, {"throttle_time": 0, "results": [
        {"name": "p", "error_code": 3, "error_message": long}]})
    _, decoded = decode_response(37, 1, encode_response(37, 1, 7, entity)[4:])
    message = decoded.results[0].error_message
    assert len(message) <= MAX_ERROR_MESSAGE and message.endswith("' does not exist.")


@pytest.mark.parametrize("version", [8, 9])
def test_produce_responses_bound_their_error_messages(version: int) -> None:
    long = "x" * 40_000
    body = encode_produce_response(version, [("t", [PartitionProduceResult(
        0, 87, error_message=long, record_errors=[(0, long)])])])
    frame = frame_response(0, version, 7, body)
    _, decoded = decode_response(0, version, frame[4:])
    partition = decoded.responses[0].partition_responses[0]
    assert len(partition.error_message) <= MAX_ERROR_MESSAGE
    assert len(partition.record_errors[0].batch_index_error_message) <= MAX_ERROR_MESSAGE
