"""Connector factories referenced by import path from translated configs (picklable functions)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import gymnasium as gym
    import torch
    from ray.rllib.connectors.connector_v2 import ConnectorV2
    from ray.rllib.connectors.env_to_module import MeanStdFilter
    from ray.rllib.utils.typing import EnvType

Spaces = dict[str, tuple["gym.Space", "gym.Space"]]


def mean_std_filter(env: EnvType | None = None, spaces: Spaces | None = None,
                    device: torch.device | None = None, *, update_stats: bool = True) -> MeanStdFilter:
    """Env-to-module connector: normalize observations with running mean/std (RLlib MeanStdFilter).

    update_stats=False (`frozen_mean_std_filter`, `raytrain eval`): normalize with the statistics it is given
    (the checkpoint's) and do not update them with the observations it sees.
    """
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    return MeanStdFilter(update_stats=update_stats)


frozen_mean_std_filter = functools.partial(mean_std_filter, update_stats=False)


def flatten_observations(env: EnvType | None = None, spaces: Spaces | None = None,
                         device: torch.device | None = None) -> ConnectorV2:
    """Env-to-module connector (`env_runners.flatten_observations`): each observation as one vector (RLlib's
    FlattenObservations: a Discrete one-hot, a MultiDiscrete one-hot per part, a Tuple or Dict concatenated),
    for observation spaces PPO's encoders cannot take as they are."""
    from ray.rllib.connectors.env_to_module import FlattenObservations

    return FlattenObservations()


def flat_mean_std_filter(env: EnvType | None = None, spaces: Spaces | None = None,
                         device: torch.device | None = None, *, update_stats: bool = True) -> list[ConnectorV2]:
    """Both: observations flattened, then normalized (`update_stats` as in `mean_std_filter`)."""
    return [flatten_observations(), mean_std_filter(update_stats=update_stats)]


frozen_flat_mean_std_filter = functools.partial(flat_mean_std_filter, update_stats=False)
