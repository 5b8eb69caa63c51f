"""Sweeps through Ray Tune: trainable, search and schedulers, storage checks, results.

A trial's Tune config is `{TRIAL_KEY: {"base": <train config>, "overrides": {dotted key: value}}}`.
"""

TRIAL_KEY = "raytrain"
