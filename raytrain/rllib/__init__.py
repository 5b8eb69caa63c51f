"""Translation of a validated raytrain config into RLlib objects (no ray.init here)."""
