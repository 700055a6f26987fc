"""atheris target: frame decoder, request header/body decoding and the batch validator.

Run by tests/faults/test_fuzz_protocol.py as a subprocess (atheris.Fuzz() exits the process).
Any exception other than the ones the broker turns into an error code or a clean disconnect is
a crash, and libFuzzer reports it with the input that caused it.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from moldau.broker.dispatch import Disconnect, load_handlers, parse_frame
    from moldau.protocol.errors import ProtocolError
    from moldau.protocol.framing import FrameDecoder
    from moldau.protocol.records.batch import InvalidBatch, validate_batches
    from moldau.protocol.records.codec import iter_decoded

load_handlers()


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0] % 3, data[1:]
    if mode == 0:
        decoder = FrameDecoder(max_frame_size=1 << 16, buffer_size=64)
        try:
            frames = decoder.feed(body)
        except ProtocolError:
            return
        for frame in frames:
            try:
                parse_frame(frame)
            except Disconnect:
                pass
    elif mode == 1:
        # Treat the input as a request frame body directly (more depth than via framing).
        try:
            parse_frame(body)
        except Disconnect:
            pass
    else:
        try:
            headers = validate_batches(body, max_batch_size=1 << 20)
        except InvalidBatch:
            return
        try:
            for _batch in iter_decoded(body):
                pass
        except ValueError:
            pass
        assert sum(h.size for h in headers) == len(body)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

