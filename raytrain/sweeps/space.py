"""A sweep's search space: the distributions a file names, and their form in a plan and in Tune.

A distribution is a model in the sweep file (`{distribution: loguniform, low: 1e-4, high: 1e-2}`), a
`DomainSpec` in the plan (`{"loguniform": [1e-4, 1e-2]}`, JSON-ready, what `--dry-run` shows) and a Tune
domain when the sweep is built (`tune.loguniform(1e-4, 1e-2)`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, model_validator

from raytrain.config.yaml_bools import RefuseBoolsForNumbers
from raytrain.tune import TRIAL_KEY

DomainSpec = dict[str, Any]
"""One distribution as plan data: `{Tune function name: its arguments}`."""


class Section(RefuseBoolsForNumbers):
    """A sweep file or one of its sections: unknown keys refused, every float finite."""

    # validate_default: defaults go through the validators too (`~` in the default storage path is expanded).
    # allow_inf_nan=False: every float is finite (a bound of .inf or .nan is refused).
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True, allow_inf_nan=False)


class Ranged(Section):
    """A distribution over [low, high]: refused where that range is empty (high not above low), at its own key.

    Its subclasses declare `distribution`, `low` and `high` themselves, so that a dump (`config show`, the
    experiment folder's sweep.yaml) writes `distribution:` first, as the file does."""

    @model_validator(mode="after")
    def _high_above_low(self) -> Ranged:
        check_range(getattr(self, "low"), getattr(self, "high"))  # noqa: B009 (declared by each subclass)
        return self


def check_range(low: float, high: float) -> None:
    """The one check of a [low, high] range, for the distributions and PB2's bounds: ValueError where it is empty."""
    if high <= low:
        raise ValueError(f"high ({high}) must be above low ({low})")


class Uniform(Ranged):
    """A float drawn uniformly from [low, high]."""

    distribution: Literal["uniform"]
    low: float
    high: float


class LogUniform(Ranged):
    """A float drawn uniformly in log space from [low, high] (learning rates)."""

    distribution: Literal["loguniform"]
    low: float = Field(gt=0)
    high: float = Field(gt=0)


class QUniform(Ranged):
    """A float drawn uniformly from [low, high] and rounded to a multiple of q."""

    distribution: Literal["quniform"]
    low: float
    high: float
    q: float = Field(gt=0)


class RandInt(Ranged):
    """An integer drawn uniformly from [low, high) (high excluded, as in Tune)."""

    distribution: Literal["randint"]
    low: int
    high: int


class Choice(Section):
    """One of `values`, drawn uniformly."""

    distribution: Literal["choice"]
    values: list[Any] = Field(min_length=1)


class Grid(Section):
    """Every one of `values` (each is run `search.num_samples` times)."""

    distribution: Literal["grid"]
    values: list[Any] = Field(min_length=1)


Distribution = Annotated[
    Uniform | LogUniform | QUniform | RandInt | Choice | Grid, Field(discriminator="distribution")
]


DISTRIBUTION_NAMES = tuple(get_args(model.model_fields["distribution"].annotation)[0]
                           for model in (Uniform, LogUniform, QUniform, RandInt, Choice, Grid))
"""The values of `distribution:`, in the schema's order."""


def domain_spec(dist: Any) -> DomainSpec:
    """A distribution (or a plain list of values, a choice) as plan data."""
    if isinstance(dist, list):
        return {"choice": dist}
    if isinstance(dist, Uniform):
        return {"uniform": [dist.low, dist.high]}
    if isinstance(dist, LogUniform):
        return {"loguniform": [dist.low, dist.high]}
    if isinstance(dist, QUniform):
        return {"quniform": [dist.low, dist.high, dist.q]}
    if isinstance(dist, RandInt):
        return {"randint": [dist.low, dist.high]}
    if isinstance(dist, Choice):
        return {"choice": dist.values}
    if isinstance(dist, Grid):
        return {"grid_search": dist.values}
    raise TypeError(dist)


def domain(spec: DomainSpec) -> Any:
    """The Tune domain (or grid search) of a plan's `DomainSpec`."""
    from ray import tune

    ((kind, args),) = spec.items()
    if kind in ("choice", "grid_search"):
        return getattr(tune, kind)(args)
    return getattr(tune, kind)(*args)


def nest(overrides: dict[str, Any]) -> dict[str, Any]:
    """{dotted key: x} where a trial's Tune config keeps it (Tune matches mutations and points by config path)."""
    return {TRIAL_KEY: {"overrides": overrides}}


def grid_size(space: dict[str, Any]) -> int:
    """How many combinations the `grid_search` specs of a space (`domain_spec` dicts) make: 1 without any."""
    size = 1
    for spec in space.values():
        if isinstance(spec, dict) and "grid_search" in spec:
            size *= len(spec["grid_search"])
    return size
