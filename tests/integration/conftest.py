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


def invoke(args):
    """Run `raytrain ARGS` in this process (typer's CliRunner), with sys.argv as a real process would have
    it, so command.txt records the real command line."""
    import sys

    from typer.testing import CliRunner

    from raytrain.cli import app

    saved = sys.argv
    sys.argv = ["raytrain", *args]
    try:
        return CliRunner().invoke(app, args)
    finally:
        sys.argv = saved
