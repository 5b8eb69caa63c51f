"""What travels between nodes: a `Message` (its kind, its name, its encoded arguments) and the encoding.

An emit's `(args, kwargs)` is pickled once in the emitting thread, so an unpicklable argument fails there,
naming the event and the type. A payload of `LARGE_PAYLOAD_BYTES` or more (a model's state_dict) is stored
once with `ray.put` and only its reference travels to the receivers.
"""

from __future__ import annotations

import enum
import pickle
from dataclasses import dataclass
from typing import Any, cast

from raytrain.errors import FrameworkError

LARGE_PAYLOAD_BYTES = 256 * 1024
"""Payloads at least this large go through the Ray object store once instead of inline to each receiver."""

Payload = Any
"""Pickled `(args, kwargs)` as bytes, or a Ray ObjectRef to them (see `encode`)."""


class MessageKind(enum.Enum):
    """What a message from another node is; the value names it in error messages."""

    EVENT = "event"
    """A task event (`task.emit`): handed to the node's task."""
    TOPIC = "topic"
    """A raw router topic (`task.router.emit`): handed to the router's own handlers."""
    FINISH = "finish"
    """Another node's task finished: end this node's run after its current step."""
    DONE = "done"
    """Another node's `main` returned (its name is that node's id): it sends nothing more. Put in this node's inbox
    by the runner, after everything that node sent."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message between nodes: its kind, the event or topic name, and its encoded `(args, kwargs)`."""

    kind: MessageKind
    name: str = ""
    data: Payload = None

    def __reduce__(self) -> tuple[type[Message], tuple[MessageKind, str, Payload]]:
        # As compact as a plain tuple on the wire: a burst sends hundreds of thousands of these.
        return (Message, (self.kind, self.name, self.data))

    @classmethod
    def pack(cls, kind: MessageKind, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Message:
        """A message carrying `args` and `kwargs`, encoded once for every receiver."""
        return cls(kind, name, encode(kind.value, name, args, kwargs))

    def unpack(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The `(args, kwargs)` this message carries."""
        return decode(self.data)


FINISH = Message(MessageKind.FINISH)
"""The message that tells a node to end its run after its current step."""


def _approx_nbytes(obj: Any, budget: list[int]) -> int:
    """A cheap size estimate of array-like data in `obj` (numpy arrays, torch tensors, bytes)."""
    budget[0] -= 1
    if budget[0] < 0:
        return 0
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return len(obj)
    if isinstance(obj, (str, int, float, bool, type(None))):
        return 0
    nbytes = getattr(obj, "nbytes", None)  # numpy
    if isinstance(nbytes, int):
        return nbytes
    if hasattr(obj, "element_size") and hasattr(obj, "nelement"):  # torch.Tensor
        try:
            return int(obj.element_size() * obj.nelement())
        except Exception:  # noqa: BLE001 - an estimate only
            return 0
    if isinstance(obj, dict):
        return sum(_approx_nbytes(v, budget) for v in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return sum(_approx_nbytes(v, budget) for v in obj)
    return 0


def _unpicklable(
    kind: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], error: Exception
) -> FrameworkError:
    import cloudpickle

    culprit = None
    for label, value in [
        *((f"argument {i}", a) for i, a in enumerate(args)),
        *((f"keyword '{k}'", v) for k, v in kwargs.items()),
    ]:
        try:
            cloudpickle.dumps(value)
        except Exception:  # noqa: BLE001 - looking for the argument that fails
            culprit = (label, type(value))
            break
    what = f"{culprit[0]} of type {culprit[1].__module__}.{culprit[1].__qualname__}" if culprit else "an argument"
    return FrameworkError(
        f"cannot send {kind} '{name}' to other nodes: {what} cannot be pickled ({type(error).__name__}: {error}). "
        f"Send plain data (numbers, arrays, dicts, a state_dict), or emit it with only_local=True."
    )


def encode(kind: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Payload:
    """Pickled `(args, kwargs)`, or an ObjectRef to them when they are large.

    `kind` ("event" or "topic") and `name` only name what could not be pickled in the error.
    """
    if _approx_nbytes((args, kwargs), [10_000]) >= LARGE_PAYLOAD_BYTES:
        import ray

        try:
            return ray.put((args, kwargs))
        except Exception as e:  # noqa: BLE001 - Ray raises several types for this
            raise _unpicklable(kind, name, args, kwargs, e) from e
    try:
        return pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - lambdas, local classes: cloudpickle can do them
        import cloudpickle

        try:
            return cloudpickle.dumps((args, kwargs))
        except Exception as e:  # noqa: BLE001
            raise _unpicklable(kind, name, args, kwargs, e) from e


def decode(data: Payload) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The `(args, kwargs)` that `encode` encoded."""
    if isinstance(data, bytes):
        return cast(tuple[tuple[Any, ...], dict[str, Any]], pickle.loads(data))
    import ray

    return cast(tuple[tuple[Any, ...], dict[str, Any]], ray.get(data))
