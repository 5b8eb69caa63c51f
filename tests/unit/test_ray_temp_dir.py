"""A local Ray's temp folder (RAY_TMPDIR, else TMPDIR, else /tmp) checked before Ray starts: too long for Ray's
Unix sockets, not absolute, or not writable is named with what to do (`ray_temp_dir_problem`), where Ray found it
only after its GCS was up (exit 1, an OSError). A real directory; no Ray runtime.
"""

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raytrain.ray_session import SOCKET_PATH_MAX, largest_pid, ray_temp_dir_problem

ADVICE = "set RAY_TMPDIR (Ray reads it before TMPDIR) to a short folder this user can write, e.g. `RAY_TMPDIR=/tmp`"


@pytest.fixture
def short_tmp():
    """A folder with a short path (/tmp/rtXXXXXXXX): pytest's own tmp_path is already too long for Ray's sockets."""
    folder = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@contextmanager
def temp_env(**values: str | None):
    """These variables set (None: unset) for the block; a hypothesis test cannot take the monkeypatch fixture."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        yield


def _tmpdir_of_socket_path(short_tmp: Path, size: int) -> Path:
    """A folder under `short_tmp` for TMPDIR whose Ray socket path (this process's pid) is `size` bytes long."""
    rest = len(f"/ray/session_0000-00-00_00-00-00_000000_{os.getpid()}/sockets/plasma_store")
    folder = short_tmp / ("d" * (size - rest - len(str(short_tmp)) - 1))
    folder.mkdir()
    return folder


def test_the_longest_socket_path_linux_allows_passes_and_one_byte_more_is_named(short_tmp):
    """The same bound as Ray's own check (checked against a real `ray.init` at 107 and 108 bytes)."""
    fits = _tmpdir_of_socket_path(short_tmp, SOCKET_PATH_MAX)
    with temp_env(RAY_TMPDIR=None, TMPDIR=str(fits)):
        assert ray_temp_dir_problem() is None
    over = _tmpdir_of_socket_path(short_tmp, SOCKET_PATH_MAX + 1)
    with temp_env(RAY_TMPDIR=None, TMPDIR=str(over)):
        problem = ray_temp_dir_problem()
    assert problem == (
        f"Ray's temp folder {over}/ray (from TMPDIR={str(over)!r}) is too long for the Unix sockets Ray makes in it: "
        f"{over}/ray/session_<date>_<pid>/sockets/plasma_store would be 108 bytes, and Linux allows 107: {ADVICE}; "
        "nothing was started")


def test_ray_tmpdir_comes_before_tmpdir_as_ray_reads_them(short_tmp):
    long = _tmpdir_of_socket_path(short_tmp, 200)
    with temp_env(RAY_TMPDIR=str(short_tmp), TMPDIR=str(long)):
        assert ray_temp_dir_problem() is None
    with temp_env(RAY_TMPDIR=str(long), TMPDIR=str(short_tmp)):
        problem = ray_temp_dir_problem()
    assert problem is not None and f"(from RAY_TMPDIR={str(long)!r})" in problem


def test_neither_set_is_ray_default_tmp():
    with temp_env(RAY_TMPDIR=None, TMPDIR=None):
        assert ray_temp_dir_problem() is None


def test_a_relative_or_empty_value_is_named():
    """Ray would make its session folder under the current directory (`ray/` there)."""
    for value in ("", "scratch", "./tmp"):
        with temp_env(RAY_TMPDIR=None, TMPDIR=value):
            assert ray_temp_dir_problem() == (
                f"Ray's temp folder comes from TMPDIR={value!r}, which is not an absolute path: {ADVICE}; "
                "nothing was started")


def test_a_file_in_the_way_is_named(short_tmp):
    (short_tmp / "file").write_text("")
    with temp_env(RAY_TMPDIR=str(short_tmp / "file" / "below"), TMPDIR=None):
        problem = ray_temp_dir_problem()
    assert problem == (f"Ray's temp folder {short_tmp}/file/below/ray cannot be made: {short_tmp}/file is not a folder "
                       f"(from RAY_TMPDIR={str(short_tmp / 'file' / 'below')!r}): {ADVICE}; nothing was started")


def test_a_folder_still_to_be_made_under_a_writable_one_passes(short_tmp):
    with temp_env(RAY_TMPDIR=str(short_tmp / "a" / "b"), TMPDIR=None):
        assert ray_temp_dir_problem() is None
    assert list(short_tmp.iterdir()) == []  # checked, nothing made


TEXT = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=300)
HOSTILE = ["/tmp/$(reboot)", "/tmp/`id`", "/tmp/a b;rm -rf ~", "/tmp/../tmp", "/tmp/\x1b[2J", "/tmp/\n", "/etc/passwd",
           "/proc/self/fd/0", "/dev/null", "/" + "x" * 5000, "~", "${HOME}", "/tmp/é" * 20]


@settings(max_examples=300, deadline=None)
@given(st.one_of(TEXT, TEXT.map(lambda text: "/tmp/" + text), st.sampled_from(HOSTILE)))
def test_any_value_is_answered_and_one_that_passes_is_usable(value):
    """Hostile values (control characters, `..`, quotes, `$(...)`, very long text): never an exception, and a
    value that passes is absolute with every socket path within Linux's limit."""
    with temp_env(RAY_TMPDIR=None, TMPDIR=value):
        problem = ray_temp_dir_problem()
    if problem is None:
        assert os.path.isabs(value)
        longest = os.path.join(value, "ray", f"session_0000-00-00_00-00-00_000000_{os.getpid()}", "sockets",
                               "plasma_store")
        assert len(os.fsencode(longest)) <= SOCKET_PATH_MAX
    else:
        assert problem.endswith(f"{ADVICE}; nothing was started") and repr(value) in problem


def test_a_head_another_process_starts_is_checked_with_the_longest_pid_this_machine_gives(short_tmp):
    """`ray start --head` in a Slurm job: its pid is not known before it starts."""
    assert largest_pid() >= 32767
    rest = len(f"/ray/session_0000-00-00_00-00-00_000000_{largest_pid()}/sockets/plasma_store")
    folder = short_tmp / ("d" * (SOCKET_PATH_MAX + 1 - rest - len(str(short_tmp)) - 1))
    folder.mkdir()
    with temp_env(RAY_TMPDIR=None, TMPDIR=str(folder)):
        assert ray_temp_dir_problem(1) is None
        assert "would be 108 bytes" in (ray_temp_dir_problem(largest_pid()) or "")


def test_the_slurm_jobs_head_step_says_why_and_where_to_set_it(short_tmp, capsys):
    from raytrain.slurm.wait import main

    long = _tmpdir_of_socket_path(short_tmp, 200)
    with temp_env(RAY_TMPDIR=None, TMPDIR=str(long)):
        assert main(["--this-ip", "--ray-temp-dir"]) == 1
    said = capsys.readouterr()
    assert said.out == ""  # no address for the batch script to take
    assert f"Ray's temp folder {long}/ray (from TMPDIR={str(long)!r}) is too long" in said.err
    assert "set RAY_TMPDIR in the Slurm file's `env:` (Ray reads it before TMPDIR)" in said.err
    with temp_env(RAY_TMPDIR=None, TMPDIR=str(short_tmp)):
        assert main(["--this-ip", "--ray-temp-dir"]) == 0
    assert capsys.readouterr().out.strip()
