"""Fixtures shared by the unit tests."""

import os

from raytrain.runs import RLLIB_PARTS


class FakeAlgorithm:
    """As much of RLlib's Algorithm as `Trainer.run` uses: train, iteration, save_to_path (RLlib's parts, empty)."""

    def __init__(self):
        self.iteration = 0
        self._time_total = 0.0

    def train(self):
        self.iteration += 1
        return {"training_iteration": self.iteration, "num_env_steps_sampled_lifetime": 100 * self.iteration,
                "time_total_s": float(self.iteration)}

    def save_to_path(self, path):
        for part in RLLIB_PARTS:
            os.makedirs(os.path.join(path, part))
