"""Integration tests run on a real local Ray, started once per session.

Mode: `ray.init()` starting a local cluster turns on Ray 2.60's token authentication
(~/.ray/auth_token); tests in this folder run in that mode, like `raytrain train` without --address.
"""

import pytest


@pytest.fixture(scope="session")
def ray_session():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()
