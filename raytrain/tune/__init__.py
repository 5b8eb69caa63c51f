"""Sweeps through Ray Tune: trainable, search and schedulers, storage checks, results.

A trial's Tune config is `{TRIAL_KEY: {"base": <train config>, "overrides": {dotted key: value}}}`, the
base's keys escaped (`escape_keys`).
"""

from __future__ import annotations

import re
from typing import Any

TRIAL_KEY = "raytrain"

_ESCAPED = re.compile(r"%(25|2F)")


def escape_keys(data: Any) -> Any:
    """`data` with `%` and `/` in every mapping key written `%25` and `%2F`.

    Tune's Optuna searcher flattens the whole trial config on `/` and refuses a key that holds one; a base
    config's stop metric (`raytrain/episode_return_mean_100`) and env_config keys may.
    """
    if isinstance(data, dict):
        return {str(k).replace("%", "%25").replace("/", "%2F"): escape_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [escape_keys(v) for v in data]
    return data


def unescape_keys(data: Any) -> Any:
    """The inverse of `escape_keys` (a base stored unescaped, by an earlier raytrain, reads as it is)."""
    if isinstance(data, dict):
        return {_ESCAPED.sub(lambda m: "%" if m[1] == "25" else "/", k) if isinstance(k, str) else k: unescape_keys(v)
                for k, v in data.items()}
    if isinstance(data, list):
        return [unescape_keys(v) for v in data]
    return data
