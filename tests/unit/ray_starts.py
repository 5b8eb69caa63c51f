"""Refuse and record every attempt to start or join Ray in a unit test that must end before Ray starts.

Through raytrain's one door (`connect_ray`) or `ray.init` itself. Asking `ray.is_initialized()` instead would
see the integration tests' session Ray when the whole suite runs in one process, and say nothing about the test.
"""


def refuse_ray_starts(monkeypatch, starts: list[str]) -> None:
    """Patch `connect_ray` and `ray.init` to append their name to `starts` and fail (cleared first)."""
    import ray

    import raytrain.ray_session

    starts.clear()

    def refuse(name):
        def start(*args, **kwargs):
            starts.append(name)
            raise AssertionError(f"{name} was called before the refusal")

        return start

    monkeypatch.setattr(raytrain.ray_session, "connect_ray", refuse("connect_ray"))
    monkeypatch.setattr(ray, "init", refuse("ray.init"))
