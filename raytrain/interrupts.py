"""Interrupts (Ctrl-C, SIGTERM) held off a block that must not be cut in two.

raytrain's signal handler (`cli.common.interrupt_on_signals`) raises KeyboardInterrupt where the program is. In
`train`, a signal that came after an iteration ended and before its metrics row was written left a checkpoint of
that iteration without its row: the resumed run's metrics skipped it. The handler asks `raise_or_hold`, and inside
`held()` the interrupt is raised when the block ends instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_holding = False
_pending = False


@contextmanager
def held() -> Iterator[None]:
    """Run the block whole: an interrupt that comes inside it is raised as KeyboardInterrupt once it ends (an
    exception of the block's own goes on as it is)."""
    global _holding, _pending
    outer = _holding
    _holding = True
    try:
        yield
    finally:
        _holding = outer
    if _pending and not outer:
        _pending = False
        raise KeyboardInterrupt


def raise_or_hold() -> None:
    """For a signal handler: raise KeyboardInterrupt now, or at the end of the `held()` block running."""
    global _pending
    if _holding:
        _pending = True
        return
    raise KeyboardInterrupt
