"""moldau.testing.install_clients: Debian packages found missing by a tool on PATH or by a file
they install (zookeeper puts nothing on PATH), installed with one apt-get, with `apt-get update`
and a retry when the package lists are stale."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from moldau.testing import install_clients


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    ran: list[list[str]] = []
    monkeypatch.setattr(install_clients.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(install_clients.os, "geteuid", lambda: 0)
    monkeypatch.setattr(install_clients, "DEBIAN_FILES", {
        str(tmp_path / "zookeeper.jar"): "zookeeper",
        str(tmp_path / "zkCli.sh"): "zookeeper"})
    monkeypatch.setattr(install_clients, "_run", lambda cmd, **kw: ran.append(cmd))
    return ran


def test_zookeeper_is_installed_when_its_jar_is_missing(commands: list[list[str]]) -> None:
    install_clients.install_debian()
    [install] = commands
    assert install[:3] == ["apt-get", "install", "-y"]
    assert install.count("zookeeper") == 1


def test_nothing_is_installed_when_everything_is_there(commands: list[list[str]],
                                                      tmp_path: Path) -> None:
    (tmp_path / "zookeeper.jar").touch()
    (tmp_path / "zkCli.sh").touch()
    install_clients.install_debian()
    assert commands == []


def test_stale_package_lists_are_updated_then_the_install_retried(
        commands: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    def run(cmd: list[str], **kwargs: Any) -> None:
        commands.append(cmd)
        if len(commands) == 1:
            raise subprocess.CalledProcessError(100, cmd)

    monkeypatch.setattr(install_clients, "_run", run)
    install_clients.install_debian()
    assert [cmd[1] for cmd in commands] == ["install", "update", "install"]
    assert "zookeeper" in commands[2]
