"""Sweeps through Ray Tune: trainable, search and schedulers, storage checks, results."""
