"""Connector factories referenced by import path from translated configs (picklable functions)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import gymnasium as gym
    import torch
    from ray.rllib.connectors.env_to_module import MeanStdFilter
    from ray.rllib.utils.typing import EnvType


def mean_std_filter(env: EnvType | None = None, spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None,
                    device: torch.device | None = None, *, update_stats: bool = True) -> MeanStdFilter:
    """Env-to-module connector: normalize observations with running mean/std (RLlib MeanStdFilter).

    update_stats=False (`frozen_mean_std_filter`, `raytrain eval`): normalize with the statistics it is given
    (the checkpoint's) and do not update them with the observations it sees.
    """
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    return MeanStdFilter(update_stats=update_stats)


frozen_mean_std_filter = functools.partial(mean_std_filter, update_stats=False)
