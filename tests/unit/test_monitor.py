"""raytrain.rllib.monitor: Tune's utilisation monitor in a Trainable, replaced by one that stops at once and reports
the same figures. Real threads and a real Tune Trainable; no Ray runtime."""

import time

import pytest
from ray.tune import Trainable
from ray.tune.utils.util import UtilMonitor

from raytrain.rllib.monitor import PromptUtilMonitor, prompt_monitor


def _until_read(monitor, within_s=30.0):
    """Wait until `monitor` has taken a reading (its thread runs), at most `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with monitor.lock:
            if any(monitor.values.values()) and not monitor.stopped:
                return
        time.sleep(0.01)
    raise AssertionError("the monitor took no reading")


def test_a_stopped_monitor_ends_without_waiting_out_its_delay():
    """Tune's monitor sleeps its whole delay before it looks at its stop flag, and `Trainable.stop` joins it; this
    one is woken by the stop. A 60 s delay: Tune's would keep the join waiting for up to a minute."""
    monitor = PromptUtilMonitor(delay=60)
    _until_read(monitor)
    monitor.stop()
    monitor.join(timeout=10)
    assert not monitor.is_alive()
    assert monitor.get_data() == {}  # stopped: as Tune's, no figures after the stop


def test_it_reports_the_figures_tunes_monitor_reports():
    ours, tunes = PromptUtilMonitor(delay=0.02), UtilMonitor(start=True, delay=0.02)
    try:
        _until_read(ours)
        _until_read(tunes)
        mine, theirs = ours.get_data(), tunes.get_data()
    finally:
        ours.stop()
        tunes.stop()
    assert set(mine) == set(theirs) == {"perf"}
    assert set(mine["perf"]) == set(theirs["perf"]) and {"cpu_util_percent", "ram_util_percent"} <= set(mine["perf"])


class Stub(Trainable):
    def step(self):
        return {"x": 1}


@pytest.fixture
def trainable(ray_results):
    """A real Tune Trainable with Tune's monitor on (RLlib turns it on: `log_sys_usage`), its scratch folder in
    tmp_path rather than ~/ray_results."""
    made = []

    def make(log_sys_usage=True):
        made.append(Stub({"log_sys_usage": log_sys_usage}))
        return made[-1]

    yield make
    for t in made:
        t.stop()


def test_a_trainables_running_monitor_is_replaced_and_its_results_keep_their_figures(trainable):
    t = trainable()
    started = t._monitor
    assert type(started) is UtilMonitor and started.is_alive()
    prompt_monitor(t)
    assert isinstance(t._monitor, PromptUtilMonitor) and t._monitor.is_alive()
    assert started.stopped  # Tune's own ends after its current sleep (a daemon thread), unjoined
    prompt_monitor(t)  # a second call changes nothing
    replaced = t._monitor
    assert t._monitor is replaced
    _until_read(t._monitor)
    assert {"cpu_util_percent", "ram_util_percent"} <= set(t.train()["perf"])
    t.stop()
    assert not replaced.is_alive()  # Trainable.stop joined it, and it had ended


def test_a_trainable_without_a_running_monitor_is_left_as_it_is(trainable):
    t = trainable(log_sys_usage=False)
    before = t._monitor
    prompt_monitor(t)
    assert t._monitor is before and not before.is_alive()
