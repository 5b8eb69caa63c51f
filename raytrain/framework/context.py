"""The per-step context that middleware reads and writes (DI-engine's `ctx`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass
class Context:
    """What one step of the pipeline shares between its middleware.

    Any attribute may be set on it. `renew()` starts the next step with a fresh context of the same type
    whose `total_step` is one more, carrying over only the kept keys. Unlike DI-engine, a key kept with `keep()` stays kept on every
    later renew, not just the next one.
    """

    total_step: int = 0
    _kept_keys: set = field(default_factory=set, repr=False, compare=False)

    def keep(self, *keys: str) -> None:
        """Carry these keys over to every later context built by `renew()`."""
        self._kept_keys.update(keys)

    def renew(self) -> Context:
        """The next step's context, as DI-engine's: a fresh one of the same type with `total_step + 1`,
        holding only the kept keys (and remembering which they are)."""
        ctx = type(self)()
        ctx._kept_keys = set(self._kept_keys) | ctx._kept_keys
        for key in self._kept_keys:
            if hasattr(self, key):
                setattr(ctx, key, getattr(self, key))
        ctx.total_step = self.total_step + 1
        return ctx

    # DI-engine's older dict-style context: ctx["key"] works too.
    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def __contains__(self, key: str) -> bool:
        return hasattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        """`ctx.key` if it is set; else set it to `default` and return that (as dict.setdefault)."""
        if not hasattr(self, key):
            setattr(self, key, default)
        return getattr(self, key)

    def keys(self) -> list[str]:
        names = [f.name for f in fields(self) if not f.name.startswith("_")]
        return names + [k for k in vars(self) if not k.startswith("_") and k not in names]


def _neg_inf() -> float:
    return -math.inf


@dataclass
class _RLContext(Context):
    """What the online and offline RL contexts share: training and evaluation results."""

    _ALWAYS_KEPT: ClassVar[frozenset[str]] = frozenset({"train_iter", "last_eval_iter", "last_eval_value"})
    """Keys every context of this type keeps across renews, besides those given to `keep()`."""

    train_iter: int = 0
    train_data: Any = None
    train_output: Any = None
    eval_value: float = field(default_factory=_neg_inf)
    eval_output: dict = field(default_factory=dict)
    last_eval_iter: int = -1
    last_eval_value: float = field(default_factory=_neg_inf)
    info_for_logging: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._kept_keys.update(self._ALWAYS_KEPT)


@dataclass
class OnlineRLContext(_RLContext):
    """Context of an online RL pipeline (collect, train, evaluate)."""

    _ALWAYS_KEPT: ClassVar[frozenset[str]] = _RLContext._ALWAYS_KEPT | {"env_step", "env_episode"}

    env_step: int = 0
    env_episode: int = 0
    collect_kwargs: dict = field(default_factory=dict)
    obs: Any = None
    action: Any = None
    inference_output: Any = None
    trajectories: Any = None
    episodes: Any = None
    trajectory_end_idx: list = field(default_factory=list)


@dataclass
class OfflineRLContext(_RLContext):
    """Context of an offline RL pipeline (train on a dataset, evaluate)."""

    _ALWAYS_KEPT: ClassVar[frozenset[str]] = _RLContext._ALWAYS_KEPT | {"trained_env_step"}

    trained_env_step: int = 0
    train_epoch: int = 0
