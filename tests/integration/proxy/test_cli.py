"""``moldau proxy`` flag validation: bad values are refused before anything starts."""

from __future__ import annotations

import pytest

from moldau.cli.main import main


@pytest.mark.parametrize(("args", "message"), [
    (["--listen-host", "0.0.0.0"], "also give --advertised-host HOST"),
    (["--advertised-host", "0.0.0.0"], "is not an address a client can connect to"),
    (["--broker-port", "one=2"], "--broker-port 'one=2' is not ID=PORT"),
    (["--port-base", "70000"], "--port-base 70000 is not a port"),
    (["--address-map", "10.0.0.1:9092"], "needs exactly one '='"),
])
def test_bad_flags_exit_2_with_a_message(args: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["proxy", "--bootstrap-server", "127.0.0.1:9092", *args]) == 2
    assert message in capsys.readouterr().err


def test_bad_bootstrap_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["proxy", "--bootstrap-server", "no-port"]) == 2
    assert "is not host:port" in capsys.readouterr().err
