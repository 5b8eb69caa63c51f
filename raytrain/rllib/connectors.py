"""Connector factories referenced by import path from translated configs (picklable functions)."""


def mean_std_filter(env=None, spaces=None, device=None):
    """Env-to-module connector: normalize observations with running mean/std (RLlib MeanStdFilter)."""
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    return MeanStdFilter()
