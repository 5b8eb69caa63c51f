"""Middleware wrappers, for `task.use_wrapper(...)`."""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable, Generator
from types import GeneratorType
from typing import Any

from raytrain.errors import FrameworkError

log = logging.getLogger("raytrain.framework")


def middleware_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


class StepTimer:
    """Times each middleware per step (forward and backward parts together) into `records[name]`.

    Args:
        print_per_step: log the mean time of every middleware every this many steps (0: never).
        smooth_window: how many windows of `print_per_step` steps `records` keeps per middleware.
    """

    def __init__(self, print_per_step: int = 1, smooth_window: int = 10) -> None:
        if not smooth_window >= 1:
            raise FrameworkError(f"StepTimer: smooth_window must be 1 or more, got {smooth_window!r}")
        if not print_per_step >= 0:
            raise FrameworkError(f"StepTimer: print_per_step must be 0 (never) or more, got {print_per_step!r}")
        self.print_per_step = print_per_step
        self.records: dict[str, deque[float]] = defaultdict(
            lambda: deque(maxlen=max(1, print_per_step) * smooth_window)
        )

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name = middleware_name(fn)

        def timed(ctx: Any) -> Generator[None, None, None]:
            started = time.perf_counter()
            out = fn(ctx)
            if isinstance(out, GeneratorType):
                try:
                    next(out)
                except StopIteration:
                    pass
                else:
                    spent = time.perf_counter() - started
                    yield
                    started = time.perf_counter()
                    try:
                        next(out)
                    except StopIteration:
                        pass
                    started -= spent
            self.records[name].append(time.perf_counter() - started)
            step = getattr(ctx, "total_step", 0)
            if self.print_per_step and step % self.print_per_step == 0:
                window = self.records[name]
                log.info(
                    "[step %d] %s: %.3f ms (mean of last %d: %.3f ms)",
                    step,
                    name,
                    window[-1] * 1e3,
                    len(window),
                    1e3 * sum(window) / len(window),
                )

        timed.__name__ = f"StepTimer<{name}>"
        return timed
