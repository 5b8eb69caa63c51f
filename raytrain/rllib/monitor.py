"""Tune's utilisation monitor, made to stop at once: an Algorithm's stop no longer waits out its 0.7 s sleep.

Every Trainable (RLlib's Algorithm among them) starts Tune's `UtilMonitor`, a thread that reads the CPU and
memory use every 0.7 s for the `perf` figures of each result (RLlib turns it on: `log_sys_usage`). Its loop
sleeps with `time.sleep`, and `Trainable.stop` joins it, so every stop waited for the rest of that sleep:
0.35 s on average, after a run's last iteration, on the way to the command's exit.

`prompt_monitor` puts in its place a `UtilMonitor` whose wait ends when it is stopped, reading the same figures
the same way (Tune's own `_read_utilization` and `get_data`), so results keep their `perf` keys as they were.
"""

from __future__ import annotations

import threading
from typing import Any

from ray.tune.utils.util import UtilMonitor


class PromptUtilMonitor(UtilMonitor):
    """`UtilMonitor` whose wait between two readings ends as soon as it is stopped."""

    def __init__(self, delay: float) -> None:
        self._wake = threading.Event()
        super().__init__(start=True, delay=delay)

    def run(self) -> None:
        if not self._wake.is_set():
            self.stopped = False  # as Tune's: `get_data` answers once the thread runs
        while not self._wake.is_set():
            self._read_utilization()
            self._wake.wait(self.delay)

    def stop(self) -> None:
        self._wake.set()
        self.stopped = True


def prompt_monitor(trainable: Any) -> None:
    """Give `trainable` (a Tune Trainable whose `__init__` has run) a `PromptUtilMonitor` in place of the
    `UtilMonitor` it started, which is stopped (a daemon thread: it ends after its current sleep, unjoined).

    Where the monitor was never started (`log_sys_usage` off) nothing changes: `Trainable.stop` joins only a
    running one.
    """
    started = getattr(trainable, "_monitor", None)  # Ray 2.60's Trainable, which pyproject pins
    if not isinstance(started, UtilMonitor) or isinstance(started, PromptUtilMonitor) or not started.is_alive():
        return
    started.stop()
    trainable._monitor = PromptUtilMonitor(delay=started.delay)
