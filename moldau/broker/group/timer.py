"""The coordinators' keyed timers (moved to :mod:`moldau.broker.coordinator.timer`)."""

from __future__ import annotations

from ..coordinator.timer import Callback, LoopTimer, ManualTimer, Timer

__all__ = ["Callback", "LoopTimer", "ManualTimer", "Timer"]
