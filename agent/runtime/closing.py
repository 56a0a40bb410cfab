"""Closing a sidecar within a deadline: stop the scheduler (without waiting for a job the database holds),
then, on a thread of its own, the ingest worker's last records, the final flush (open windows too) and the
alert state (Sidecar.close). If that has not finished in time, or failed, every window row still unwritten
goes to the dead-letter file (Store.spill), so a database that does not answer at shutdown costs no record;
the report says what was flushed, spilled or lost, for the log to tell the truth."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Closed:
    """What a close did. ``finished``: the flush and the alert state completed (else a thread is still held by
    the database); ``error``: what failed; ``spilled`` / ``lost``: window rows let go of into the dead-letter
    file / that it could not take."""

    seconds: float
    finished: bool
    error: BaseException | None
    spilled: int
    lost: int
    dead_letter: str

    @property
    def clean(self) -> bool:
        """Every record reached the database and the alert state was persisted."""
        return self.finished and self.error is None and not self.spilled and not self.lost

    def describe(self) -> str:
        if self.clean:
            return "every record flushed, alert state persisted"
        what = "did not finish" if not self.finished else f"failed ({self.error})"
        out = f"the final flush {what}"
        if self.spilled:
            out += f"; {self.spilled} unwritten window rows dead-lettered to {self.dead_letter}"
        if self.lost:
            out += f"; {self.lost} window rows LOST (the dead-letter file failed; they are in the log)"
        if not self.spilled and not self.lost:
            out += "; no record was unwritten"
        return out

    def raise_for_failure(self) -> None:
        if self.error is not None:
            raise self.error


def close_within(sidecar, jobs, seconds: float | None) -> Closed:
    """Close ``sidecar`` (stopping ``jobs`` first) within ``seconds`` (None: as long as it takes)."""
    started = time.monotonic()
    store = sidecar.store
    spilled, lost = store.spilled, store.lost
    failure: list[BaseException] = []

    def close() -> None:
        try:
            sidecar.close()
        except BaseException as exc:  # noqa: BLE001 - reported, and what it left unwritten is spilled
            failure.append(exc)

    jobs.shutdown(wait=seconds is None, final_flush=False)
    if seconds is None:
        close()
        finished = True
    else:
        worker = threading.Thread(target=close, name="specwatch-close", daemon=True)
        worker.start()
        worker.join(max(0.0, seconds - (time.monotonic() - started)))
        finished = not worker.is_alive()
    error = failure[0] if failure else None
    if not finished:
        error = TimeoutError(f"the database did not answer within {seconds:g} s")
    if not finished or store.unwritten:
        store.spill(f"unwritten at shutdown: {error}" if error else "unwritten at shutdown",
                    wait=1.0 if finished else 0.2)
    return Closed(time.monotonic() - started, finished, error, store.spilled - spilled, store.lost - lost,
                  str(store.dead_letter_path))
