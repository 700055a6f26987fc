"""pyproject.toml: metadata that installs without warnings.

``project.license`` as a table (``{ text = "Apache-2.0" }``) made setuptools print a
deprecation warning, three times, on every ``pip install`` (a new user's first ``make run``);
the SPDX string form needs setuptools 77 or later (PEP 639), so the build requirement says so.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_license_is_an_spdx_expression_with_a_setuptools_that_reads_it() -> None:
    data = tomllib.loads(PYPROJECT.read_text())
    assert data["project"]["license"] == "Apache-2.0"
    [setuptools] = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools)
    assert match and int(match[1]) >= 77, setuptools
