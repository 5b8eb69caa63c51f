"""`nothing_left_to_print`: whether the files Ray's log monitor forwards to the driver are all empty, so that a
local Ray's shutdown at exit need not wait half a second for their lines. A real log folder; no Ray runtime."""

import pytest

from raytrain.ray_session import nothing_left_to_print

RAY_LOGS = [  # what a local Ray of `raytrain train` with no actors leaves in its log folder (Ray 2.60), all empty
    "raylet.err", "gcs_server.err", "dashboard.err", "dashboard_agent.err", "monitor.err", "log_monitor.err",
    "runtime_env_setup-01000000.log", "events/event_AUTOSCALER.log", "events/event_GCS.log",
]
OWN_LOGS = {  # Ray's processes' own logs, never forwarded: they have content
    "raylet.out": "raylet started\n", "gcs_server.out": "gcs started\n", "dashboard.log": "x\n",
    "runtime_env_agent.log": "agent started\n", "monitor.log": "Monitor: Started\n",
    "python-core-driver-01000000ffff_123.log": "driver\n", "debug_state.txt": "state\n",
}


@pytest.fixture
def logs(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_RUNTIME_ENV_LOG_TO_DRIVER_ENABLED", raising=False)
    for name in RAY_LOGS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    for name, text in OWN_LOGS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_ray_that_ran_no_worker_has_nothing_left_to_print(logs):
    assert nothing_left_to_print(logs)


def test_empty_worker_files_leave_nothing_to_print(logs):
    (logs / "worker-ab12-01000000-4242.out").write_text("")
    (logs / "worker-ab12-01000000-4242.err").write_text("")
    assert nothing_left_to_print(logs)


@pytest.mark.parametrize("name", [
    "worker-ab12-01000000-4242.out", "worker-ab12-01000000-4242.err", "java-worker-01000000-1.log", "raylet.err",
    "gcs_server.err", "events/event_AUTOSCALER.log", "tpu_logs/libtpu.log",
])
def test_a_line_in_a_file_the_log_monitor_forwards_may_still_be_on_its_way(logs, name):
    (logs / name).parent.mkdir(parents=True, exist_ok=True)
    (logs / name).write_text("(Runner pid=4242) last words\n")
    assert not nothing_left_to_print(logs)


def test_runtime_env_logs_count_only_where_ray_forwards_them(logs, monkeypatch):
    (logs / "runtime_env_setup-01000000.log").write_text("installing\n")
    assert nothing_left_to_print(logs)  # the agent's and set-up logs stay on the node unless asked for
    monkeypatch.setenv("RAY_RUNTIME_ENV_LOG_TO_DRIVER_ENABLED", "1")
    assert not nothing_left_to_print(logs)


def test_an_autoscaler_event_summary_may_still_be_on_its_way(logs):
    (logs / "monitor.log").write_text("Monitor: Started\n:event_summary:Resized to 2 CPUs.\n")
    assert not nothing_left_to_print(logs)


def test_a_file_that_cannot_be_read_counts_as_something_to_print(logs):
    (logs / "monitor.log").unlink()
    (logs / "monitor.log").mkdir()  # read_text: IsADirectoryError
    assert not nothing_left_to_print(logs)


def test_a_log_folder_that_is_gone_has_nothing_to_print(tmp_path):
    assert nothing_left_to_print(tmp_path / "gone")
