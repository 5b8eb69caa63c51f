"""A YAML true/false where a number is needed is an error, not the number 1 or 0.

YAML reads `yes`, `no`, `on`, `off`, `true` and `false` as booleans, and pydantic's lax mode takes a
boolean for an int or a float (Python's `True == 1`). So `gamma: yes` trained with gamma 1.0,
`checkpoint_frequency: on` checkpointed every iteration and `fcnet_hiddens: [true, 64]` built a layer of one
unit, each without a word. Every config model's base mixes in `RefuseBoolsForNumbers`: a boolean given to a
field (or a list item or mapping value inside it) whose type has a number but no boolean is refused, with
the path to it. Text fields refuse booleans already (pydantic's own `string_type`, explained in load.py).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, model_validator
from pydantic_core import PydanticCustomError

ERROR_TYPE = "bool_for_number"

_Where = tuple[int | str, ...]


def _bools(value: Any, tp: Any) -> list[_Where] | None:
    """Where in `value` a boolean stands for a number, by the type `tp`: [] none, None `value` does not
    have `tp`'s shape at all (pydantic says what is wrong then)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        return _bools(value, args[0])
    if origin in (Union, types.UnionType):
        found = [_bools(value, member) for member in args]
        if any(f == [] for f in found):
            return []
        return next((f for f in found if f), None)
    if origin is Literal:
        return [] if any(type(a) is type(value) and a == value for a in args) else None
    if tp is Any or tp is object or isinstance(tp, typing.TypeVar):
        return []
    if origin in (list, tuple, set, frozenset, Sequence) or (origin is not None and _is(origin, Sequence)):
        if not isinstance(value, (list, tuple)):
            return None
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                return None
            items = list(zip(value, args, strict=True))
        else:
            items = [(v, args[0] if args else Any) for v in value]
        return _merge((i, _bools(v, t)) for i, (v, t) in enumerate(items))
    if origin is dict or (origin is not None and _is(origin, Mapping)):
        if not isinstance(value, dict):
            return None
        inner = args[1] if len(args) == 2 else Any
        return _merge((k, _bools(v, inner)) for k, v in value.items())
    if isinstance(tp, type) and issubclass(tp, bool):
        return []
    if isinstance(tp, type) and issubclass(tp, (int, float)):
        if isinstance(value, bool):
            return [()]
        return [] if isinstance(value, (int, float, str)) else None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [] if isinstance(value, dict) else None  # its own fields are checked by its own validator
    if tp is type(None):
        return [] if value is None else None
    # Text, paths, addresses: a scalar other than a boolean may be theirs (pydantic decides), and pydantic
    # refuses a boolean for them itself.
    return [] if not isinstance(value, (bool, list, tuple, dict)) else None


def _is(origin: Any, abc: type) -> bool:
    return isinstance(origin, type) and issubclass(origin, abc)


def _merge(parts: typing.Iterable[tuple[int | str, list[_Where] | None]]) -> list[_Where] | None:
    found: list[_Where] = []
    for key, inner in parts:
        if inner is None:
            return None
        found += [(key, *where) for where in inner]
    return found


def bools_for_numbers(value: Any, tp: Any) -> list[_Where]:
    """Where in `value` (given for a field of type `tp`) YAML's true/false stands where a number is needed."""
    return _bools(value, tp) or []


def describe(value: bool, written: str | None = None) -> str:
    """The error for `value` given where a number is needed; `written`: its text in the file, if known."""
    shown = "true" if value else "false"
    read = f"reads {written} as {shown}" if written and written != shown else f"reads the value as {shown}"
    return (f"must be a number, but YAML {read} (yes/no, on/off and true/false are all booleans in YAML), which "
            f"would count as {int(value)}: write the number you mean")


def _at(value: Any, where: _Where) -> Any:
    for w in where:
        value = value[w]
    return value


class RefuseBoolsForNumbers(BaseModel):
    """Base of every config section: a YAML boolean is no number (see the module's doc).

    A model validator, not a field validator: pydantic allows no field validator on a discriminator
    (`schedule:`, `distribution:`). The path below the model goes in the error's context (`where`), which
    load.py's `pydantic_issues` appends to the error's location to find the line.
    """

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_number(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = {f.alias or name: f for name, f in cls.model_fields.items()}
        fields.update({name: f for name, f in cls.model_fields.items() if name not in fields})
        for key, value in data.items():
            field = fields.get(key)
            if field is None:
                continue  # an unknown key: pydantic refuses it
            found = bools_for_numbers(value, field.annotation)
            if found:
                where = (key, *found[0])
                wrong = _at(value, found[0])
                raise PydanticCustomError(ERROR_TYPE, describe(wrong), {"where": where, "value": wrong})
        return data
