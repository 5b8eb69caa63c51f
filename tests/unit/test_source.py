"""YAML lines and --set overrides."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raytrain.config.load import load_config
from raytrain.config.source import MAX_DEPTH, apply_overrides, override_text, parse_override, parse_yaml, read_yaml
from raytrain.errors import ConfigError


def test_lines_recorded_for_nested_keys():
    src = parse_yaml("a:\n  b:\n    c: 1\n  d: [1, 2]\n", "f.yaml")
    assert src.where(("a", "b", "c")) == "f.yaml:3"
    assert src.where(("a", "d", "1")) == "f.yaml:4"
    assert src.where(("a", "zzz")) == "f.yaml:1"


@pytest.mark.parametrize(
    "text,path,value",
    [
        ("training.lr=0.001", ("training", "lr"), 0.001),
        ("model.fcnet_hiddens=[32, 32]", ("model", "fcnet_hiddens"), [32, 32]),
        ("experiment.name=my run", ("experiment", "name"), "my run"),
        ("training.use_gae=false", ("training", "use_gae"), False),
        ("stop={training_iteration: 2}", ("stop",), {"training_iteration": 2}),
    ],
)
def test_parse_override(text, path, value):
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize("text", ["training.lr", "=3", "a..b=1"])
def test_bad_override(text):
    with pytest.raises(ConfigError):
        parse_override(text)


@pytest.mark.parametrize(("text", "said"), [
    # Hydra's and shells' habits: it was "training.lr: Input should be a valid number (got '3e-4,training.gamma=0.9')".
    ("training.lr=3e-4,training.gamma=0.9", "--set training.lr=3e-4 --set training.gamma=0.9"),
    ("stop.training_iteration=2 stop.env_runners/episode_return_mean=450",
     "--set stop.training_iteration=2 --set stop.env_runners/episode_return_mean=450"),
    ("training.lr=0.001; training.gamma=0.9", "--set training.lr=0.001 --set training.gamma=0.9"),
])
def test_several_overrides_in_one_set_are_told_one_set_each(text, said):
    with pytest.raises(ConfigError) as info:
        parse_override(text)
    key = text.partition("=")[0]
    assert str(info.value) == (f"--set {text}: holds more than one override: give each its own --set, as in {said} "
                               f"(a value with such text in it: quote it, {key}='...')")


@pytest.mark.parametrize("text", ["environment.env_config.args='x, y.z=1'",
                                  "environment.env_config.expr=a.b=1"])
def test_a_value_that_only_looks_like_more_overrides_is_kept(text):
    """After a separator only, and not in a value YAML quotes: `a.b=1` right after `=` is the value's own text."""
    assert parse_override(text)[0][0] in ("experiment", "environment")


def test_override_wins_and_is_reported(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining: {lr: 0.01}\n")
    loaded = load_config(path, ["training.lr=0.0005", "training.gamma=0.9"])
    assert loaded.config.training.lr == 0.0005
    assert loaded.config.training.gamma == 0.9
    assert "override: training.lr = 0.0005 (was 0.01)" in loaded.notices
    assert "override: training.gamma = 0.9 (not set in the file)" in loaded.notices


def test_override_errors_name_the_flag(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, ["training.num_epochz=3"])
    assert str(info.value).startswith("--set training.num_epochz=3: training.num_epochz: unknown key; did you mean 'num_epochs'")


def test_override_through_old_name(write_yaml):
    loaded = load_config(write_yaml("environment: {env: CartPole-v1}\n"), ["training.num_sgd_iter=4"])
    assert loaded.config.training.num_epochs == 4


def test_override_into_a_scalar_is_an_error():
    src = parse_yaml("a: 1\n", "f.yaml")
    with pytest.raises(ConfigError) as info:
        apply_overrides(src, ["a.b=2"])
    assert "is not a section" in str(info.value)


# --- hostile YAML: every refusal is a ConfigError (exit 2) naming file:line ---------------------------------


def issues_of(path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    return [str(i) for i in info.value.issues]


def test_duplicate_key_names_both_lines(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr: 0.001\n  num_epochs: 3\n  lr: 0.002\n")
    (msg,) = issues_of(path)
    assert msg.startswith(f"{path}:5: training.lr: duplicate key")
    assert f"first at {path}:3" in msg


def test_section_given_twice_is_an_error_not_a_silent_drop(write_yaml):
    # The second `training:` used to replace the first, dropping lr, batch and epochs.
    path = write_yaml(
        "environment: {env: CartPole-v1}\ntraining:\n  lr: 0.001\n  train_batch_size: 400\n"
        "model: {fcnet_hiddens: [8]}\ntraining:\n  gamma: 0.9\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (msg,) = [str(i) for i in info.value.issues]
    assert msg.startswith(f"{path}:6: training: duplicate key") and f"first at {path}:2" in msg


def test_every_duplicate_is_reported_at_once(write_yaml):
    path = write_yaml("a: {x: 1, x: 2}\nb:\n  - {y: 1, y: 2}\na: 3\n")
    msgs = issues_of(path)
    assert [m.split(" duplicate")[0] for m in msgs] == [f"{path}:1: a.x:", f"{path}:3: b.0.y:", f"{path}:4: a:"]


def test_keys_equal_in_python_are_duplicates(write_yaml):
    # YAML 1.1 reads `yes` as true, and Python's dict would keep one of the two.
    (msg,) = issues_of(write_yaml("stop:\n  1: 5\n  1.0: 6\n"))
    assert ":3: stop.1.0: duplicate key" in msg


def test_a_key_repeated_through_an_alias_is_a_duplicate(write_yaml):
    (msg,) = issues_of(write_yaml("a:\n  &k lr: 1\n  *k : 2\n"))
    assert ": a.lr: duplicate key: 'lr'" in msg


def test_merge_key_overrides_are_not_duplicates(write_yaml):
    src = parse_yaml("base: &b {x: 1, y: 2}\nrun:\n  <<: *b\n  y: 3\n", "f.yaml")
    assert src.data == {"base": {"x": 1, "y": 2}, "run": {"x": 1, "y": 3}}


def test_alias_bomb_is_refused_before_it_expands(data_dir):
    # 342 bytes: 9 levels of `&x [*w, *w, ... x9]`, 9**9 = 387 million items written out. The old loader walked
    # every one of them to record lines (1.8 GB and 14 s for only 6 of the 9 levels).
    (msg,) = issues_of(data_dir / "alias_bomb.yaml")
    assert msg.startswith(f"{data_dir / 'alias_bomb.yaml'}:5: e: this value expands to 66,430 YAML nodes")
    assert "more than the 10,000" in msg


def test_alias_bomb_stays_small_in_memory(data_dir):
    """Bound by structure, not time: parsing the bomb allocates almost nothing (the old loader took gigabytes)."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ConfigError):
            read_yaml(data_dir / "alias_bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"peak {peak:,} bytes"


def test_aliases_within_the_budget_work_and_are_not_shared(write_yaml):
    path = write_yaml("defaults: &d {lr: 0.1, sizes: [1, 2]}\na: *d\nb: *d\n")
    src = read_yaml(path)
    assert src.data["a"] == src.data["b"] == {"lr": 0.1, "sizes": [1, 2]}
    # Lines are recorded where things are written: an alias's content points at the alias.
    assert src.where(("defaults", "lr")) == f"{path}:1"
    assert src.where(("b", "lr")) == f"{path}:3"
    assert len(src.origins) == 7  # defaults, .lr, .sizes, .sizes.0, .sizes.1, a, b: nothing inside a or b
    # An override of one path does not change the others that came from the same anchor.
    apply_overrides(src, ["a.sizes=[5]", "b.lr=0.5"])
    assert src.data == {"defaults": {"lr": 0.1, "sizes": [1, 2]}, "a": {"lr": 0.1, "sizes": [5]}, "b": {"lr": 0.5, "sizes": [1, 2]}}


def test_recursive_alias_is_refused(write_yaml):
    path = write_yaml("a: 1\nb: &b [1, *b]\n")
    (msg,) = issues_of(path)
    assert msg.startswith(f"{path}:2: ") and "refers to a value that contains it" in msg


def test_deep_nesting_is_refused_with_its_line(write_yaml):
    # 20,000 nested `[` used to end in a RecursionError (exit 1, a traceback).
    path = write_yaml("a: 1\nb: " + "[" * 20_000 + "]" * 20_000 + "\n")
    (msg,) = issues_of(path)
    assert msg == f"{path}:2: nested more than {MAX_DEPTH} levels deep; a config needs far fewer"


def test_nesting_through_aliases_is_refused(write_yaml):
    deep = "[" * 60 + "1" + "]" * 60
    path = write_yaml(f"a: &a {deep}\nb: &b [{'[' * 50}*a{']' * 50}]\n")
    (msg,) = issues_of(path)
    assert msg.startswith(f"{path}:2: b") and "levels deep once its aliases are written out" in msg


def test_undecodable_bytes_name_their_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"environment: {env: CartPole-v1}\nexperiment:\n  name: caf\xe9\n")
    assert issues_of(path) == [f"{path}:3: byte 0xe9 at column 12 is not UTF-8; save the file as UTF-8"]


def test_nul_and_control_characters_name_their_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"a: 1\nb: x\x00y\n")
    assert issues_of(path) == [f"{path}:2: a NUL byte at column 5: YAML text cannot contain it"]
    path.write_bytes(b"a: 1\n\nb: \x1b[31m\n")
    assert issues_of(path) == [f"{path}:3: the control character U+001B at column 4: YAML text cannot contain it"]


def test_utf8_with_bom_is_read(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: caf\xc3\xa9\n")
    assert read_yaml(path).data == {"a": "café"}


def test_unreadable_value_names_its_line(write_yaml):
    path = write_yaml("a: 1\nwhen: 2024-13-01\n")
    (msg,) = issues_of(path)
    assert msg.startswith(f"{path}:2: when: cannot read this value") and "month" in msg


def test_several_documents_are_refused(write_yaml):
    path = write_yaml("a: 1\n---\nb: 2\n")
    (msg,) = issues_of(path)
    assert msg.startswith(f"{path}:2: invalid YAML:")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("x={a: 1, a: 2}", "duplicate key: 'a'"),
        ("x=" + "[" * 5000 + "]" * 5000, "nested more than"),
        ("x=[a\x00]", "a NUL byte"),
        ("x=[*y]", "undefined alias"),
    ],
)
def test_override_values_go_through_the_same_loader(text, expected):
    with pytest.raises(ConfigError) as info:
        parse_override(text)
    (issue,) = info.value.issues
    assert issue.where == f"--set {text}" and issue.path == "x" and expected in issue.message


def test_lines_are_recorded_once_per_written_node(write_yaml):
    """Linear in the file: aliases add one origin each, however much they expand to."""
    body = "a: &a [" + ", ".join(str(i) for i in range(50)) + "]\n" + "".join(f"k{i}: *a\n" for i in range(100))
    src = read_yaml(write_yaml(body))
    assert len(src.data["k99"]) == 50
    assert len(src.origins) == 1 + 50 + 100


# --- values a command-line flag sets (--name, the Slurm file's storage_path) travel as `key=value` text ----


@pytest.mark.parametrize("value", ["2024", "yes", "no", "null", "~", "1e3", "x: y", "#1", "'q'", "a b", "", "/nfs/run #2", "[1]",
                                   "a b.c=1", "/nfs/x;y.z=2"])
def test_a_flags_text_value_reaches_the_config_as_the_same_text(value):
    """`--name 2024` was YAML-read as the number 2024 and refused ("Input should be a valid string")."""
    assert parse_override(override_text("name", value)) == (("name",), value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()))
def test_any_flag_value_round_trips_through_its_override_text(value):
    assert parse_override(override_text("checkpoint.storage_path", value)) == (("checkpoint", "storage_path"), value)


def test_the_text_of_plain_scalars_yaml_read_as_booleans_or_numbers_is_kept_by_path():
    """For messages about what YAML made of a value (`4:00:00` is 14400): values only, never keys; quoted and
    text scalars are not kept; an override replaces what the file wrote below its path."""
    source = parse_yaml("a: {on: yes, t: 4:00:00, q: '5', s: text}\nb: [1.0e-3, off]\n1: x\n", "f.yaml")
    assert source.written == {("a", "on"): "yes", ("a", "t"): "4:00:00", ("b", "0"): "1.0e-3", ("b", "1"): "off"}
    apply_overrides(source, ["a=No", "c.d=0x10"])
    assert source.written == {("b", "0"): "1.0e-3", ("b", "1"): "off", ("a",): "No", ("c", "d"): "0x10"}
    source.move(("b",), ("e",))
    assert ("e", "1") in source.written and ("b", "1") not in source.written
