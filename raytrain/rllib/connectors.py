"""Connector factories referenced by import path from translated configs (picklable functions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import gymnasium as gym
    import torch
    from ray.rllib.connectors.env_to_module import MeanStdFilter
    from ray.rllib.utils.typing import EnvType


def mean_std_filter(env: EnvType | None = None, spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None,
                    device: torch.device | None = None) -> MeanStdFilter:
    """Env-to-module connector: normalize observations with running mean/std (RLlib MeanStdFilter)."""
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    return MeanStdFilter()


def frozen_mean_std_filter(env: EnvType | None = None, spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None,
                           device: torch.device | None = None) -> MeanStdFilter:
    """The MeanStdFilter of `raytrain eval`: it normalizes with the statistics it is given (the checkpoint's)
    and does not update them with the evaluation's observations."""
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    return MeanStdFilter(update_stats=False)
