"""Metadata's auto-creation waits a bounded time for the controller, then answers "being
created" (LEADER_NOT_AVAILABLE) while the creation goes on: a busy or replaced controller
must not hold a client's connection for the forwarding time-out."""

from __future__ import annotations

import asyncio
import time

from moldau.broker.metadata.channel import TopicResult, TopicSpec
from moldau.broker.services import auto_create_topics_bounded
from moldau.protocol.errors import ErrorCode, KafkaError


class StalledController:
    """A controller channel whose CreateTopics waits until ``release`` is set."""

    def __init__(self, errors: dict[str, ErrorCode] | None = None) -> None:
        self.release = asyncio.Event()
        self.calls: list[list[str]] = []
        self.errors = errors or {}

    async def create_topics(self, specs: list[TopicSpec]) -> list[TopicResult]:
        self.calls.append([s.name for s in specs])
        await self.release.wait()
        return [TopicResult(s.name, self.errors.get(s.name, ErrorCode.none), num_partitions=1)
                for s in specs]


class FailingController:
    async def create_topics(self, specs: list[TopicSpec]) -> list[TopicResult]:
        raise KafkaError(ErrorCode.not_controller, "controller moved")


def test_a_stalled_controller_is_answered_being_created_and_asked_once() -> None:
    async def main() -> None:
        controller = StalledController()
        creations: dict = {}
        started = time.monotonic()
        first = await auto_create_topics_bounded(controller, creations, ["a"],  # type: ignore[arg-type]
                                                 wait_s=0.2)
        assert time.monotonic() - started < 2
        assert first == {"a": ErrorCode.leader_not_available}
        # a client asking again joins the creation under way
        second = await auto_create_topics_bounded(controller, creations, ["a"],  # type: ignore[arg-type]
                                                  wait_s=0.1)
        assert second == {"a": ErrorCode.leader_not_available}
        assert controller.calls == [["a"]]
        controller.release.set()
        await asyncio.sleep(0.05)
        assert creations == {}  # finished: forgotten

    asyncio.run(main())


def test_a_prompt_controller_is_waited_for_and_its_errors_kept() -> None:
    async def main() -> None:
        controller = StalledController({"bad": ErrorCode.policy_violation})
        controller.release.set()
        creations: dict = {}
        failed = await auto_create_topics_bounded(controller, creations, ["ok", "bad"])  # type: ignore[arg-type]
        assert failed == {"bad": ErrorCode.policy_violation}
        assert controller.calls == [["ok", "bad"]]

    asyncio.run(main())


def test_a_controller_error_is_being_created_not_a_crash() -> None:
    async def main() -> None:
        creations: dict = {}
        failed = await auto_create_topics_bounded(FailingController(), creations, ["t"])  # type: ignore[arg-type]
        assert failed == {"t": ErrorCode.leader_not_available}
        await asyncio.sleep(0)
        assert creations == {}

    asyncio.run(main())
