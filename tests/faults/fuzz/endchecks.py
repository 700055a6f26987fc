"""The live fuzzer's end checks (:mod:`.live`), run once the inputs are sent: the ledger reads
back; confluent-kafka and kafka-python read the reference topics exactly and every partition
of every topic to its end; then the broker is restarted cleanly and after kill -9 and must
still serve the reference data, the ledger and the same (log start, log end) offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import checks
from .support import BrokerLog, no_problems

if TYPE_CHECKING:
    from .live import Fuzzer


def check(fuzzer: Fuzzer, name: str, fn: Any) -> None:
    """Run one end check; a failure becomes a finding."""
    try:
        fn()
    except Exception as exc:
        fuzzer.finding("end-check", f"{name} failed", f"{type(exc).__name__}: {exc}", [])
    else:
        print(f"[fuzz] end check {name}: ok", flush=True)


def final_checks(fuzzer: Fuzzer, ref: checks.Reference) -> None:
    broker = fuzzer.broker
    assert broker is not None
    if broker.proc is None or broker.proc.poll() is not None:
        return
    port = broker.port()
    check(fuzzer, "ledger", lambda: fuzzer.ledger.verify(port))
    for client in ("confluent-kafka", "kafka-python"):
        check(fuzzer, f"reference/{client}",
              lambda c=client: checks.read_reference(port, ref, c))
        check(fuzzer, f"consume-all/{client}", lambda c=client: no_problems(
            checks.consume_everything(port, c)))
    fuzzer.scan_log(None, final=True)
    if not fuzzer.s.restart:
        return
    before = checks.offsets_snapshot(port)
    for how in ("clean restart", "kill -9 restart"):
        if how.startswith("clean"):
            code = broker.stop(60)
            if code != 0:
                fuzzer.finding("restart", f"broker exited {code} on SIGTERM",
                               broker.log_text()[-2000:], [])
        else:
            broker.kill()
        try:
            broker.start(timeout=120)
        except Exception as exc:
            fuzzer.finding("restart", f"broker did not start after {how}",
                           f"{exc}\n{broker.log_text()[-3000:]}", [])
            return
        port = broker.port()
        fuzzer.log = BrokerLog(broker.log_path)
        check(fuzzer, f"{how}/reference",
              lambda p=port: checks.read_reference(p, ref, "confluent-kafka"))
        check(fuzzer, f"{how}/ledger", lambda p=port: fuzzer.ledger.verify(p))
        after = checks.offsets_snapshot(port)
        changed = {tp: (before.get(tp), span) for tp, span in after.items()
                   if before.get(tp) != span}
        lost = sorted(set(before) - set(after))
        if changed or lost:
            fuzzer.finding("restart", f"offsets differ after {how}",
                           f"(log start, log end) before -> after: "
                           f"{dict(list(changed.items())[:10])}; partitions gone: {lost[:10]}",
                           [], known="defect 5?")
    broker.stop(60)
