"""Moldau: a Kafka-compatible event streaming platform written in Python."""

import sys as _sys

__version__ = "0.1.0"


def _import_kio_without_hypothesis() -> None:
    """Import kio with hypothesis hidden, unless this process already imported hypothesis.

    kio registers hypothesis strategies for its types whenever hypothesis is importable (it is
    one of our test dependencies, so it sits in the development venv). Registering them builds
    hypothesis's Unicode table: about 1.4 s added to every broker and CLI start, and a
    ``.hypothesis/`` directory left in the user's current directory. Moldau never uses those
    strategies. A test run imports hypothesis first (pytest's plugin), so nothing changes there.
    """
    if "hypothesis" in _sys.modules or "kio" in _sys.modules:
        return
    _sys.modules["hypothesis"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        import kio.static.primitive  # noqa: F401  (the module that holds the hooks)
    finally:
        del _sys.modules["hypothesis"]


_import_kio_without_hypothesis()
