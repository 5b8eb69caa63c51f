"""torch.nn.init's in-place initializers as RLlib applies them to a network's layers, checked before Ray starts.

RLlib calls `initializer(tensor, **kwargs)` for each layer when it builds the network, in every learner and env
runner, once Ray has started: an argument torch does not take, a required one left out, or an initializer for
tensors of other dimensions (an `orthogonal_` bias) failed there with torch's error. The table below is pinned
to torch's own signatures and dimension checks by a test.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

NUMBER = "a number"
_NONLINEARITIES = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                   "sigmoid", "tanh", "relu", "leaky_relu", "selu")
_ARGUMENTS: dict[str, tuple[str, ...] | str] = {
    "val": NUMBER, "gain": NUMBER, "a": NUMBER, "b": NUMBER, "mean": NUMBER, "std": NUMBER, "sparsity": NUMBER,
    "mode": ("fan_in", "fan_out"), "nonlinearity": _NONLINEARITIES, "groups": "a whole number >= 1",
}
"""What each argument takes: a kind, or its choices."""


@dataclass(frozen=True)
class Initializer:
    arguments: tuple[str, ...] = ()
    """The keyword arguments a config can give (torch's `generator`, an object, it cannot)."""
    required: tuple[str, ...] = ()
    dimensions: tuple[int, int | None] = (1, None)
    """The tensor dimensions it takes: (least, most or None)."""


_FANS = (2, None)  # fan in and fan out need two dimensions
INITIALIZERS: dict[str, Initializer] = {
    "constant_": Initializer(("val",), ("val",)),
    "dirac_": Initializer(("groups",), dimensions=(3, 5)),
    "eye_": Initializer(dimensions=(2, 2)),
    "kaiming_normal_": Initializer(("a", "mode", "nonlinearity"), dimensions=_FANS),
    "kaiming_uniform_": Initializer(("a", "mode", "nonlinearity"), dimensions=_FANS),
    "normal_": Initializer(("mean", "std")),
    "ones_": Initializer(),
    "orthogonal_": Initializer(("gain",), dimensions=_FANS),
    "sparse_": Initializer(("sparsity", "std"), ("sparsity",), dimensions=(2, 2)),
    "trunc_normal_": Initializer(("mean", "std", "a", "b")),
    "uniform_": Initializer(("a", "b")),
    "xavier_normal_": Initializer(("gain",), dimensions=_FANS),
    "xavier_uniform_": Initializer(("gain",), dimensions=_FANS),
    "zeros_": Initializer(),
}
"""torch.nn.init's in-place initializers, the names RLlib takes for a layer's weights or biases."""

LAYERS: dict[str, tuple[str, int]] = {
    "fcnet_kernel": ("a layer's weights have", 2),
    "fcnet_bias": ("a bias is a vector (1 dimension)", 1),
    "conv_kernel": ("a CNN kernel has", 4),
    "conv_bias": ("a bias is a vector (1 dimension)", 1),
    "head_fcnet_kernel": ("a layer's weights have", 2),
    "head_fcnet_bias": ("a bias is a vector (1 dimension)", 1),
    "lstm_kernel": ("an LSTM's weights have", 2),
    "lstm_bias": ("a bias is a vector (1 dimension)", 1),
    "fusionnet_kernel": ("a layer's weights have", 2),
    "fusionnet_bias": ("a bias is a vector (1 dimension)", 1),
}
"""Each `model.<layer>_initializer`: the tensor RLlib gives it, in words, and its dimensions."""


def takes_dimensions(name: str, dims: int) -> bool:
    least, most = INITIALIZERS[name].dimensions
    return dims >= least and (most is None or dims <= most)


def _dimensions(name: str) -> str:
    least, most = INITIALIZERS[name].dimensions
    if most is None:
        return f"{least} or more dimensions"
    if least == most:
        return f"{least} dimensions"
    return f"{', '.join(map(str, range(least, most)))} or {most} dimensions"


def _argument_problem(name: str, key: str, value: Any) -> str | None:
    spec = INITIALIZERS[name]
    if key not in spec.arguments:
        takes = f"it takes {', '.join(spec.arguments)}" if spec.arguments else "it takes none"
        if key == "generator":
            return f"torch's {name} takes no generator from a config ({takes})"
        near = difflib.get_close_matches(key, spec.arguments, n=1)
        return f"torch's {name} takes no {key} ({takes})" + (f"; did you mean {near[0]}?" if near else "")
    kind = _ARGUMENTS[key]
    if kind == NUMBER:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(kind, str):  # groups
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    else:
        ok = value in kind
    if ok:
        return None
    what = f"one of {', '.join(kind)}" if isinstance(kind, tuple) else kind
    return f"torch's {name} takes {what} as {key} (got {value!r})"


def initializer_problems(model: Any) -> list[tuple[tuple[str, ...], str]]:
    """(path below `model`, what is wrong) for each initializer of `model` (a ModelConfig) that torch would refuse
    for the layer RLlib gives it, or its arguments."""
    problems: list[tuple[tuple[str, ...], str]] = []
    for layer, (tensor, dims) in LAYERS.items():
        name, kwargs = getattr(model, f"{layer}_initializer"), getattr(model, f"{layer}_initializer_kwargs")
        if name is None or name.lower() not in INITIALIZERS:
            continue
        name = name.lower()
        field = f"{layer}_initializer"
        if not takes_dimensions(name, dims):
            fits = [n for n in INITIALIZERS if takes_dimensions(n, dims)]
            has = tensor if dims == 1 else f"{tensor} {dims}"
            problems.append(((field,), f"torch's {name} takes a tensor of {_dimensions(name)}, and {has}: use one of "
                                       f"{', '.join(fits)}"))
            continue
        given = kwargs or {}
        for key, value in given.items():
            if (problem := _argument_problem(name, str(key), value)) is not None:
                problems.append(((f"{field}_kwargs", str(key)), problem))
        missing = [key for key in INITIALIZERS[name].required if key not in given]
        if missing:
            set_ = ", ".join(f"{key}: ..." for key in missing)
            problems.append(((field,), f"torch's {name} needs {', '.join(missing)}: set model.{field}_kwargs: "
                                       f"{{{set_}}}"))
    return problems


def idle_arguments(model: Any) -> list[str]:
    """The `<layer>_initializer_kwargs` fields of `model` set without their initializer: RLlib passes them to
    that initializer only."""
    return [f"{layer}_initializer_kwargs" for layer in LAYERS
            if getattr(model, f"{layer}_initializer_kwargs") is not None and getattr(model, f"{layer}_initializer") is None]
