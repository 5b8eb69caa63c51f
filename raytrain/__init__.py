"""raytrain: train and sweep RLlib agents on your own Ray cluster from one YAML file."""

__version__ = "0.1.0"
