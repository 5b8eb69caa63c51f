"""RLlib names that raytrain spells differently, and where their values go.

Most are old names (from configs and docs written for the old API stack): RLlib's new API stack
renamed many settings, and when they are passed as a dict some old names are silently ignored. A few
are RLlib's current names that raytrain shortens or writes as in YAML (RLLIB_SPELLINGS, read from the
schema's field metadata). raytrain accepts each, moves its value to its raytrain key and prints one
notice naming that key, so nothing a user wrote is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raytrain.config.schema import rllib_fields
from raytrain.config.source import Source
from raytrain.errors import ConfigError, ConfigIssue, in_file_order


def _piecewise(value: Any) -> Any:
    # Old RLlib schedules were bare [[timestep, value], ...] lists.
    return {"schedule": "piecewise", "points": value} if isinstance(value, list) else value


Alias = tuple[str, str, Callable[[Any], Any] | None]
"""(section, raytrain key, value converter)."""

# RLlib's former names -> where their values go now.
OLD_NAMES: dict[str, Alias] = {
    "num_rollout_workers": ("env_runners", "num_env_runners", None),
    "num_workers": ("env_runners", "num_env_runners", None),
    "num_envs_per_worker": ("env_runners", "num_envs_per_env_runner", None),
    "num_cpus_per_worker": ("env_runners", "num_cpus_per_env_runner", None),
    "num_gpus_per_worker": ("env_runners", "num_gpus_per_env_runner", None),
    "custom_resources_per_worker": ("env_runners", "custom_resources_per_env_runner", None),
    "sgd_minibatch_size": ("training", "minibatch_size", None),
    "num_sgd_iter": ("training", "num_epochs", None),
    "shuffle_sequences": ("training", "shuffle_batch_per_epoch", None),
    "lr_schedule": ("training", "lr", _piecewise),
    "entropy_coeff_schedule": ("training", "entropy_coeff", _piecewise),
    "num_learner_workers": ("learners", "num_learners", None),
    "num_cpus_per_learner_worker": ("learners", "num_cpus_per_learner", None),
    "num_gpus_per_learner_worker": ("learners", "num_gpus_per_learner", None),
    "num_gpus": ("learners", "num_gpus_per_learner", None),
    "num_cpus_for_local_worker": ("resources", "num_cpus_for_main_process", None),
    "evaluation_num_workers": ("evaluation", "evaluation_num_env_runners", None),
}

# RLlib's *current* names (attributes of today's PPOConfig) of the fields raytrain spells differently:
# `lambda_` (raytrain writes `lambda`, as RLlib's dict configs do), `train_batch_size_per_learner`.
RLLIB_SPELLINGS: dict[str, Alias] = {f.keyword: (f.section, f.key, None) for f in rllib_fields() if f.renamed_only}

# RLlib key -> (section, raytrain key, value converter)
KEY_ALIASES: dict[str, Alias] = {**OLD_NAMES, **RLLIB_SPELLINGS}

SECTION_ALIASES = {"rollouts": "env_runners"}

# Old schedules replaced the base value: RLlib ignored `lr` when `lr_schedule` was set.
SCHEDULE_REPLACES = {"lr_schedule", "entropy_coeff_schedule"}

# Settings with no meaning on the new API stack: an error, with what to do instead.
UNSUPPORTED = {
    "_fake_gpus": "fake GPUs were an old-API-stack debugging aid and do nothing on the new stack; remove it",
}

STOP_ALIASES = {
    "episode_reward_mean": "env_runners/episode_return_mean",
    "sampler_results/episode_reward_mean": "env_runners/episode_return_mean",
    "episode_reward_max": "env_runners/episode_return_max",
    "sampler_results/episode_reward_max": "env_runners/episode_return_max",
    "episode_reward_min": "env_runners/episode_return_min",
    "sampler_results/episode_reward_min": "env_runners/episode_return_min",
    "episode_len_mean": "env_runners/episode_len_mean",
    "sampler_results/episode_len_mean": "env_runners/episode_len_mean",
    "timesteps_total": "num_env_steps_sampled_lifetime",
    "episodes_total": "env_runners/num_episodes_lifetime",
    "env_runners/episode_reward_mean": "env_runners/episode_return_mean",
}


def describe(key: str) -> str:
    """What a KEY_ALIASES key is: "an old RLlib name" or "RLlib's name" (a current one raytrain spells differently)."""
    return "RLlib's name" if key in RLLIB_SPELLINGS else "an old RLlib name"


RENAME_HINT = " Rename it to silence this."
"""The end of a notice of an old name: `config import-rllib`, which writes the new name itself, leaves it off."""


def _notice(source: Source, path: tuple[str, ...], new: str, extra: str = "") -> str:
    where = source.where(path)
    prefix = f"{where}: " if where else ""
    what = "RLlib's name for this setting; raytrain calls it" if path[-1] in RLLIB_SPELLINGS else "an old RLlib name; using"
    return f"notice: {prefix}{'.'.join(path)} is {what} {new}{extra}.{RENAME_HINT}"


def normalize(source: Source) -> list[str]:
    """Rewrite old names in `source.data` in place to the new keys; return the notices.

    Raises:
        ConfigError: for settings that have no meaning on the new stack, or an old and a new name
            both set for the same key.
    """
    data = source.data
    notices: list[tuple[str | None, str]] = []  # (where the old name is, the notice): shown in file order
    issues: list[ConfigIssue] = []

    def put(section: str, key: str, value: Any, old_path: tuple[str, ...], replaces_base: bool) -> None:
        target = data.setdefault(section, {})
        if not isinstance(target, dict):
            return  # pydantic reports the section's type error
        extra = ""
        if key in target:
            if replaces_base and not isinstance(target[key], dict):
                extra = f" (it replaces {section}.{key}: {target[key]}, as it did in old RLlib)"
            else:
                named = f"is {'RLlib' + chr(39) + 's' if old_path[-1] in RLLIB_SPELLINGS else 'the old'} name of {section}.{key}"
                where, there = source.where(old_path) or "", source.where((section, key)) or ""
                if where.startswith("--set ") and not there.startswith("--set "):
                    # An override of what the file sets: the override that works, under the new name.
                    given, _, raw = where.removeprefix("--set ").partition("=")
                    value_text = raw if given.split(".")[-1] == old_path[-1] else "..."
                    said = (f"{named}, which {there} sets; override it under its own name: "
                            f"--set {section}.{key}={value_text}")
                else:
                    said = f"{named}, which is also set; keep only {section}.{key}"
                issues.append(ConfigIssue(where or None, ".".join(old_path), said))
                return
        notices.append((source.where(old_path), _notice(source, old_path, f"{section}.{key}", extra)))
        target[key] = value
        source.move(old_path, (section, key))

    # Sections under their old names.
    for old, new in SECTION_ALIASES.items():
        if old in data:
            value = data.pop(old)
            notices.append((source.where((old,)), _notice(source, (old,), new)))
            if new in data and isinstance(data[new], dict) and isinstance(value, dict):
                for k, v in value.items():
                    if k in data[new]:
                        issues.append(
                            ConfigIssue(source.where((old, k)), f"{old}.{k}", f"is also set as {new}.{k}; keep one")
                        )
                    else:
                        data[new][k] = v
                        source.move((old, k), (new, k))
            else:
                data[new] = value
                source.move((old,), (new,))

    # Old names at the top level (flat old-style configs) and inside any section.
    containers: list[tuple[tuple[str, ...], dict]] = [((), data)]
    containers += [((name,), sec) for name, sec in list(data.items()) if isinstance(sec, dict) and name != "stop"]
    for prefix, container in containers:
        for key in list(container):
            path = prefix + (key,)
            if key in UNSUPPORTED:
                issues.append(ConfigIssue(source.where(path), ".".join(path), UNSUPPORTED[key]))
            elif key == "framework" and prefix in ((), ("experiment",), ("resources",)):
                value = container.pop(key)
                if value != "torch":
                    issues.append(
                        ConfigIssue(
                            source.where(path),
                            ".".join(path),
                            f"framework {value!r} is not supported: RLlib's new API stack is PyTorch only; "
                            "remove the key",
                        )
                    )
                else:
                    where = source.where(path)
                    notices.append((where, f"notice: {where + ': ' if where else ''}{'.'.join(path)}: torch is the "
                                    "only framework on RLlib's new API stack; the key is not needed"))
            elif key in KEY_ALIASES:
                section, new_key, convert = KEY_ALIASES[key]
                value = container.pop(key)
                put(section, new_key, convert(value) if convert else value, path, key in SCHEDULE_REPLACES)
            elif key == "model" and prefix == ("training",) and isinstance(container[key], dict):
                # Old configs nested the network under `training.model` (config["model"]).
                for mkey, mvalue in container.pop(key).items():
                    put("model", mkey, mvalue, path + (mkey,), False)

    stop = data.get("stop")
    if isinstance(stop, dict):
        for key in list(stop):
            if key in STOP_ALIASES:
                new = STOP_ALIASES[key]
                value = stop.pop(key)
                if new in stop:
                    issues.append(
                        ConfigIssue(source.where(("stop", key)), f"stop.{key}", f"is the old name of stop.{new}, also set")
                    )
                    continue
                stop[new] = value
                notices.append((source.where(("stop", key)), _notice(source, ("stop", key), f"stop.{new}")))
                source.move(("stop", key), ("stop", new))
    if issues:
        raise ConfigError(issues)
    return [text for _, text in in_file_order(notices, lambda notice: notice[0])]
