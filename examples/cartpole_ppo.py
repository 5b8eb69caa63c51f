"""Distributed PPO on CartPole-v1, written as DI-engine-style middleware on `raytrain.framework`.

One learner, one evaluator and N collectors, each a node of a parallel run (a Ray actor):

    collector --"trajectories"--> learner --"model"--> collectors, evaluator
    evaluator: task.finish = True once the greedy evaluation return reaches the target (ends every node)

Roles, by default from the node's place in the run (node 0 learner, node 1 evaluator, nodes 2.. collectors):
with one node it plays every role in one pipeline (events stay in the process); with two, node 0 is learner
and evaluator and node 1 the collector. A node labelled `learner`, `evaluator` or `collector` (runner
labels, or `main(roles={node_id: "collector", ...})`) plays that role instead.

Run it:

    python examples/cartpole_ppo.py 4            # learner + evaluator + 2 collectors
    python examples/cartpole_ppo.py 3 --seed 1   # 1 collector
    raytrain run examples/cartpole_ppo.py --main main --workers 4

Plain torch and gymnasium: no RLlib and no DI-engine.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from raytrain.framework import OnlineRLContext, Parallel, Task, task

ROLES = ("learner", "evaluator", "collector")


@dataclass
class PPOConfig:
    """Everything `main` accepts as keyword arguments (its defaults are tuned for 2 CPUs)."""

    seed: int = 0
    """Seed of the model's initial weights (the same on every node), the environments and the sampling."""
    target: float = 475.0
    """Mean greedy evaluation return at which the evaluator ends the run."""
    max_seconds: float = 300.0
    """Safety limit: the evaluator ends the run after this many seconds even if the target is not reached."""
    num_envs: int = 8
    """Environments each collector steps together (a gymnasium vector env)."""
    rollout_steps: int = 64
    """Steps per environment in one collected batch (a batch is num_envs * rollout_steps env steps)."""
    model_wait_s: float = 1.0
    """How long a collector waits for a model newer than its last batch's before collecting with the old one."""
    hidden: int = 64
    """Width of the two hidden layers of the actor and of the critic."""
    lr: float = 1e-3
    """Adam learning rate."""
    gamma: float = 0.98
    gae_lambda: float = 0.8
    clip: float = 0.2
    """PPO's ratio clipping."""
    epochs: int = 10
    """Passes over each training batch."""
    minibatch_size: int = 256
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    eval_episodes: int = 10
    """Greedy episodes per evaluation (run together in a vector env)."""
    log_every_s: float = 2.0
    """Seconds between progress lines of the learner and of the evaluator."""
    start_time: float | None = None
    """`time.time()` at launch, if known: the evaluator then also reports the time since launch."""


# -- the model ---------------------------------------------------------------------------------------
class ActorCritic(nn.Module):
    """Separate actor and critic MLPs for CartPole (4 observations, 2 actions)."""

    def __init__(self, hidden: int = 64, obs_dim: int = 4, n_actions: int = 2):
        super().__init__()

        def mlp(out: int, gain: float) -> nn.Sequential:
            net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
            head = nn.Linear(hidden, out)
            for layer in [*net[::2], head]:
                nn.init.orthogonal_(layer.weight, np.sqrt(2) if layer is not head else gain)
                nn.init.zeros_(layer.bias)
            return nn.Sequential(*net, head)

        self.actor = mlp(n_actions, 0.01)
        self.critic = mlp(1, 1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: np.ndarray, greedy: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Actions (sampled, or greedy) and their log-probabilities for a batch of observations."""
        logits = self.actor(torch.as_tensor(obs, dtype=torch.float32))
        logp_all = torch.log_softmax(logits, dim=-1)
        if greedy:
            action = logits.argmax(dim=-1)
        else:
            action = torch.multinomial(logp_all.exp(), 1).squeeze(-1)
        return action.numpy(), logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1).numpy()


def build_model(cfg: PPOConfig) -> ActorCritic:
    # Same seed on every node: every node starts from the same weights, version (train_iter) 0.
    torch.manual_seed(cfg.seed)
    return ActorCritic(cfg.hidden)


def node_label(task: Task) -> str:
    return f"node.{task.router.node_id}" if task.router.is_active else "standalone"


def log(task: Task, message: str) -> None:
    print(f"[{node_label(task)}] {message}", flush=True)


# -- shared middleware --------------------------------------------------------------------------------
class ModelReceiver:
    """Load the latest model the learner broadcast (`"model"` events) into a local copy of the policy.

    Waits up to `timeout` seconds for a model newer than the one loaded (in short slices, ending early when
    the task finishes); when none comes, the node goes on with the model it has.

    Input of ctx:
        - train_iter (int): the version of the model this node used last (kept across steps).
    Output of ctx:
        - train_iter (int): the version of the model now loaded.
        - env_step (int): the learner's env step count when it sent that model.
        - info_for_logging["model_updated"] (bool): whether a newer model was loaded in this step.
    """

    def __init__(self, task: Task, model: nn.Module, timeout: float):
        self._task = task
        self._model = model
        self._timeout = timeout
        self._latest: tuple[dict, int, int] | None = None
        self._cv = threading.Condition()
        self._loaded_iter = 0  # every node starts from the same weights, version 0
        task.on("model", self._on_model)

    def _on_model(self, state_dict: dict, train_iter: int, env_step: int = 0) -> None:
        # Runs on the inbox thread: keep only the newest model and let the pipeline load it.
        with self._cv:
            if self._latest is None or train_iter > self._latest[1]:
                self._latest = (state_dict, train_iter, env_step)
                self._cv.notify_all()

    def _newer(self) -> bool:
        return self._latest is not None and self._latest[1] > self._loaded_iter

    def __call__(self, ctx: OnlineRLContext) -> None:
        deadline = time.monotonic() + self._timeout
        with self._cv:
            while not self._newer() and not self._task.finish:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(min(left, 0.1))
            latest = self._latest if self._newer() else None
        ctx.info_for_logging["model_updated"] = latest is not None
        if latest is not None:
            state_dict, self._loaded_iter, ctx.env_step = latest
            self._model.load_state_dict(state_dict)
        ctx.train_iter = self._loaded_iter


# -- collector ----------------------------------------------------------------------------------------
class Collector:
    """Step a vector of CartPole envs with the current policy for a fixed number of steps.

    Input of ctx:
        - train_iter (int): the version of the policy acting (recorded with the batch).
    Output of ctx:
        - trajectories (dict[str, np.ndarray]): `obs`, `next_obs` [T, E, 4]; `action`, `logp`, `reward`,
          `terminated`, `done` [T, E] (time-major, one column per env). `next_obs` of a finished episode
          is its final observation, so the learner can bootstrap a truncated one.
        - episodes (list[float]): the returns of the episodes that ended in this batch.
        - env_episode (int): episodes finished by this collector so far.
    """

    def __init__(self, cfg: PPOConfig, model: ActorCritic, seed: int):
        self._cfg = cfg
        self._model = model
        self._env = gym.make_vec(
            "CartPole-v1",
            num_envs=cfg.num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )
        self._obs, _ = self._env.reset(seed=seed)
        self._returns = np.zeros(cfg.num_envs)
        self._episodes = 0

    def __call__(self, ctx: OnlineRLContext) -> None:
        T, E = self._cfg.rollout_steps, self._cfg.num_envs
        buf = {
            "obs": np.zeros((T, E, 4), np.float32),
            "next_obs": np.zeros((T, E, 4), np.float32),
            "action": np.zeros((T, E), np.int64),
            "logp": np.zeros((T, E), np.float32),
            "reward": np.zeros((T, E), np.float32),
            "terminated": np.zeros((T, E), np.float32),
            "done": np.zeros((T, E), np.float32),
        }
        finished: list[float] = []
        obs = self._obs
        for t in range(T):
            action, logp = self._model.act(obs)
            next_obs, reward, terminated, truncated, info = self._env.step(action)
            done = terminated | truncated
            buf["obs"][t], buf["action"][t], buf["logp"][t], buf["reward"][t] = obs, action, logp, reward
            buf["terminated"][t], buf["done"][t] = terminated, done
            buf["next_obs"][t] = next_obs
            if done.any():  # same-step autoreset: next_obs is already the next episode's first observation
                buf["next_obs"][t, done] = np.stack(info["final_obs"][done])
            self._returns += reward
            finished.extend(self._returns[done].tolist())
            self._returns[done] = 0.0
            obs = next_obs
        self._obs = obs
        self._episodes += len(finished)
        ctx.trajectories, ctx.episodes, ctx.env_episode = buf, finished, self._episodes


def trajectory_sender(task: Task) -> Callable[[OnlineRLContext], None]:
    """Send the collected batch to the learner.

    Input of ctx:
        - trajectories (dict[str, np.ndarray]), episodes (list[float]), train_iter (int).
    Output of ctx: none (emits `"trajectories"` with the batch and, as keywords, `train_iter`,
    `episode_returns` and `collector`, this node's id).
    """

    def _send(ctx: OnlineRLContext) -> None:
        if ctx.trajectories is None:
            return
        collector = task.router.node_id if task.router.is_active else 0
        task.emit(
            "trajectories",
            ctx.trajectories,
            train_iter=ctx.train_iter,
            episode_returns=ctx.episodes,
            collector=collector,
        )

    return _send


# -- learner ------------------------------------------------------------------------------------------
class TrajectoryReceiver:
    """Learner: buffer the collectors' `"trajectories"` and hand everything buffered to the trainer.

    Waits (in short slices, ending early when the task finishes) until at least one batch is there.

    Input of ctx: none.
    Output of ctx:
        - train_data (list[dict[str, np.ndarray]] | None): the batches received since the last step
          (None when the task finished while waiting).
        - env_step (int): env steps received so far.
        - episodes (list[float]): returns of the episodes that ended in those batches.
        - info_for_logging["policy_lag"] (float): mean of (learner version - version that collected).
    """

    def __init__(self, task: Task):
        self._task = task
        self._batches: list[tuple[dict, int]] = []
        self._episodes: list[float] = []
        self._cv = threading.Condition()
        task.on("trajectories", self._on_trajectories)

    def _on_trajectories(self, batch: dict, train_iter: int, episode_returns=(), collector: int = 0) -> None:
        with self._cv:
            self._batches.append((batch, train_iter))
            self._episodes.extend(episode_returns)
            self._cv.notify_all()

    def __call__(self, ctx: OnlineRLContext) -> None:
        with self._cv:
            while not self._batches and not self._task.finish:
                self._cv.wait(0.1)
            batches, self._batches = self._batches, []
            episodes, self._episodes = self._episodes, []
        if not batches:
            return
        ctx.train_data = [b for b, _ in batches]
        ctx.env_step += sum(b["reward"].size for b in ctx.train_data)
        ctx.episodes = episodes
        ctx.info_for_logging["policy_lag"] = float(np.mean([ctx.train_iter - it for _, it in batches]))


class PPOLearner:
    """PPO update (GAE, clipped surrogate, value loss) on the batches of this step.

    Input of ctx:
        - train_data (list[dict[str, np.ndarray]] | None): batches as the Collector makes them.
        - train_iter (int): updates done so far.
    Output of ctx:
        - train_iter (int): one more when it trained.
        - train_output (dict[str, float]): policy_loss, value_loss, entropy, approx_kl, clip_fraction.
    """

    def __init__(self, cfg: PPOConfig, model: ActorCritic):
        self._cfg = cfg
        self._model = model
        self._optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, eps=1e-5)

    def _advantages(self, batch: dict) -> tuple[np.ndarray, np.ndarray]:
        cfg = self._cfg
        with torch.no_grad():
            value = self._model.value(torch.as_tensor(batch["obs"])).numpy()
            next_value = self._model.value(torch.as_tensor(batch["next_obs"])).numpy()
        # A truncated episode (time limit) is bootstrapped from its final observation; a failed one is not.
        delta = batch["reward"] + cfg.gamma * next_value * (1.0 - batch["terminated"]) - value
        adv = np.zeros_like(delta)
        running = np.zeros(delta.shape[1], np.float32)
        for t in reversed(range(delta.shape[0])):
            running = delta[t] + cfg.gamma * cfg.gae_lambda * (1.0 - batch["done"][t]) * running
            adv[t] = running
        return adv, adv + value

    def __call__(self, ctx: OnlineRLContext) -> None:
        if not ctx.train_data:
            return
        cfg = self._cfg
        parts = [(b, *self._advantages(b)) for b in ctx.train_data]

        def flat(key):
            return torch.as_tensor(np.concatenate([b[key].reshape(-1, *b[key].shape[2:]) for b, _, _ in parts]))

        obs, action, old_logp = flat("obs"), flat("action"), flat("logp")
        adv = torch.as_tensor(np.concatenate([a.reshape(-1) for _, a, _ in parts]))
        ret = torch.as_tensor(np.concatenate([r.reshape(-1) for _, _, r in parts]))
        n = obs.shape[0]
        stats: dict[str, list[float]] = {k: [] for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip")}
        for _ in range(cfg.epochs):
            for idx in torch.randperm(n).split(cfg.minibatch_size):
                mb_adv = adv[idx]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                logp_all = torch.log_softmax(self._model.actor(obs[idx]), dim=-1)
                logp = logp_all.gather(-1, action[idx].unsqueeze(-1)).squeeze(-1)
                log_ratio = logp - old_logp[idx]
                ratio = log_ratio.exp()
                policy_loss = -torch.min(ratio * mb_adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * mb_adv).mean()
                value_loss = 0.5 * (self._model.value(obs[idx]) - ret[idx]).pow(2).mean()
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy
                self._optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self._model.parameters(), cfg.max_grad_norm)
                self._optimizer.step()
                with torch.no_grad():
                    stats["policy_loss"].append(policy_loss.item())
                    stats["value_loss"].append(value_loss.item())
                    stats["entropy"].append(entropy.item())
                    stats["approx_kl"].append(((ratio - 1) - log_ratio).mean().item())
                    stats["clip"].append(((ratio - 1).abs() > cfg.clip).float().mean().item())
        ctx.train_iter += 1
        ctx.train_output = {k: float(np.mean(v)) for k, v in stats.items()}


def model_broadcaster(task: Task, model: nn.Module) -> Callable[[OnlineRLContext], None]:
    """Send the learner's weights to every collector and the evaluator after each update.

    Input of ctx:
        - train_output (dict | None): set when this step trained; nothing is sent otherwise.
        - train_iter (int), env_step (int).
    Output of ctx: none (emits `"model"` with the `state_dict` and, as keywords, `train_iter`, `env_step`).
    """

    def _broadcast(ctx: OnlineRLContext) -> None:
        if ctx.train_output is None:
            return
        state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
        task.emit("model", state_dict, train_iter=ctx.train_iter, env_step=ctx.env_step)

    return _broadcast


def learner_logger(task: Task, cfg: PPOConfig) -> Callable[[OnlineRLContext], None]:
    """Print the learner's progress every `cfg.log_every_s` seconds.

    Input of ctx:
        - train_iter, env_step (int); train_output (dict | None); episodes (list[float] | None);
          info_for_logging["policy_lag"] (float).
    Output of ctx: none.
    """
    recent: deque[float] = deque(maxlen=100)
    state = {"last": 0.0, "started": time.monotonic()}

    def _log(ctx: OnlineRLContext) -> None:
        recent.extend(ctx.episodes or ())
        now = time.monotonic()
        if ctx.train_output is None or now - state["last"] < cfg.log_every_s:
            return
        state["last"] = now
        out = ctx.train_output
        mean_return = f"{np.mean(recent):6.1f}" if recent else "   n/a"
        log(
            task,
            f"learner iter {ctx.train_iter:4d}  env_step {ctx.env_step:7d}  collect return {mean_return}  "
            f"kl {out['approx_kl']:.4f}  clip {out['clip']:.2f}  entropy {out['entropy']:.3f}  "
            f"lag {ctx.info_for_logging.get('policy_lag', 0.0):.2f}  ({now - state['started']:.1f} s)",
        )

    return _log


# -- evaluator ----------------------------------------------------------------------------------------
class Evaluator:
    """Greedy evaluation of each new model; ends the run (`task.finish = True`) at the target return.

    Only the newest model is evaluated: models that arrive during an evaluation are skipped. Also ends the
    run, saying so, after `cfg.max_seconds`.

    Input of ctx:
        - train_iter (int): version of the loaded model; env_step (int): the learner's env steps for it.
        - info_for_logging["model_updated"] (bool): evaluate only when a new model was loaded.
    Output of ctx:
        - eval_value (float): mean greedy return of this evaluation.
        - eval_output (dict): returns (list[float]), seconds since start, reached (bool).
        - last_eval_iter (int), last_eval_value (float).
    """

    def __init__(self, task: Task, cfg: PPOConfig, model: ActorCritic, seed: int):
        self._task = task
        self._cfg = cfg
        self._model = model
        # CartPole-v1's own numpy vector env: every evaluation episode steps together, cheaply.
        self._env = gym.make_vec("CartPole-v1", num_envs=cfg.eval_episodes, vectorization_mode="vector_entry_point")
        self._seed = seed
        self._started = time.monotonic()
        self._last_log = 0.0
        self.result: dict = {"reached": False}

    def _evaluate(self) -> np.ndarray:
        obs, _ = self._env.reset(seed=self._seed)
        self._seed += 1
        n = self._cfg.eval_episodes
        returns, running = np.zeros(n), np.ones(n, bool)
        while running.any():
            action, _ = self._model.act(obs, greedy=True)
            obs, reward, terminated, truncated, _ = self._env.step(action)
            returns += reward * running
            running &= ~(terminated | truncated)
        return returns

    def __call__(self, ctx: OnlineRLContext) -> None:
        cfg, task = self._cfg, self._task
        elapsed = time.monotonic() - self._started
        if ctx.info_for_logging.get("model_updated"):
            returns = self._evaluate()
            elapsed = time.monotonic() - self._started
            ctx.eval_value = float(returns.mean())
            ctx.last_eval_iter, ctx.last_eval_value = ctx.train_iter, ctx.eval_value
            reached = ctx.eval_value >= cfg.target
            ctx.eval_output = {"returns": returns.tolist(), "seconds": elapsed, "reached": reached}
            now = time.monotonic()
            if reached or now - self._last_log >= cfg.log_every_s:
                self._last_log = now
                log(
                    task,
                    f"eval   iter {ctx.train_iter:4d}  env_step {ctx.env_step:7d}  return {ctx.eval_value:6.1f} "
                    f"(min {returns.min():.0f})  ({elapsed:.1f} s)",
                )
            if reached:
                since_launch = ""
                if cfg.start_time is not None:
                    since_launch = f", {time.time() - cfg.start_time:.1f} s since launch"
                log(
                    task,
                    f"reached mean evaluation return {ctx.eval_value:.1f} >= {cfg.target:g} at train_iter "
                    f"{ctx.train_iter}, env_step {ctx.env_step}: {elapsed:.1f} s wall time since the evaluator "
                    f"started{since_launch}",
                )
                self.result = {
                    "reached": True,
                    "seconds": elapsed,
                    "train_iter": ctx.train_iter,
                    "env_step": ctx.env_step,
                    "eval_return": ctx.eval_value,
                }
                task.finish = True
                return
        if elapsed >= cfg.max_seconds:
            log(
                task,
                f"STOPPING: max_seconds={cfg.max_seconds:g} passed without reaching the target {cfg.target:g} "
                f"(best so far: last evaluation {ctx.last_eval_value:.1f} at train_iter {ctx.last_eval_iter})",
            )
            self.result = {"reached": False, "seconds": elapsed, "eval_return": ctx.last_eval_value}
            task.finish = True


# -- roles and main ----------------------------------------------------------------------------------
def node_roles(task: Task) -> set[str]:
    """The roles this node plays: from its labels if it has role labels, else from its place in the run."""
    labelled = {role for role in ROLES if task.match_labels(role)}
    if labelled:
        return labelled
    router = task.router
    if not router.is_active or len(router.node_ids) == 1:
        return set(ROLES)
    ids = sorted(router.node_ids)
    index = ids.index(router.node_id)
    if len(ids) == 2:
        return {"learner", "evaluator"} if index == 0 else {"collector"}
    return {ROLES[min(index, 2)]}


def main(roles: dict[int, str] | None = None, **kwargs) -> dict | None:
    """Run this node's part of distributed PPO; returns the evaluator's result (None on other nodes).

    Args:
        roles: optional `{node_id: "learner" | "evaluator" | "collector" (comma-separated for several)}`,
            given to the node as labels; nodes not named get their role from their place in the run.
        **kwargs: any field of `PPOConfig` (seed, target, max_seconds, num_envs, ...).
    """
    cfg = PPOConfig(**kwargs)
    torch.set_num_threads(1)  # several nodes share few CPUs; one thread each is fastest for a small MLP
    node_id = task.router.node_id if task.router.is_active else 0
    labels = [r.strip() for r in (roles or {}).get(node_id, "").split(",") if r.strip()]
    evaluator = None
    with task.start(async_mode=False, ctx=OnlineRLContext(), labels=labels):
        my_roles = node_roles(task)
        log(task, f"roles: {', '.join(r for r in ROLES if r in my_roles)}  (seed {cfg.seed})")
        # With several roles in one node, the pipeline is collect -> train -> evaluate, and the events between
        # them stay in the process (an emit reaches the emitting node's own handlers too).
        if "collector" in my_roles:
            policy = build_model(cfg)
            task.use(ModelReceiver(task, policy, timeout=cfg.model_wait_s))
            task.use(Collector(cfg, policy, seed=cfg.seed * 1000 + node_id))
            task.use(trajectory_sender(task))
        if "learner" in my_roles:
            model = build_model(cfg)
            task.use(TrajectoryReceiver(task))
            task.use(PPOLearner(cfg, model))
            task.use(model_broadcaster(task, model))
            task.use(learner_logger(task, cfg))
        if "evaluator" in my_roles:
            policy = build_model(cfg)
            # Alone, the evaluator waits for models in short slices so it can check its time limit.
            task.use(ModelReceiver(task, policy, timeout=0.5 if my_roles == {"evaluator"} else 0.0))
            evaluator = Evaluator(task, cfg, policy, seed=cfg.seed * 1000 + 999)
            task.use(evaluator)
        torch.manual_seed(cfg.seed * 1000 + node_id + 1)  # sampling differs between collectors
        task.run()
    return evaluator.result if evaluator is not None else None


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workers", nargs="?", type=int, default=4, help="nodes: learner, evaluator, collectors")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse_args(sys.argv[1:])
    launched = time.time()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # keep every node's progress lines
    if args.workers > 1:  # one worker runs in this process, without Ray
        import ray

        ray.init(num_cpus=2, include_dashboard=False)
    results = Parallel.runner(n_parallel_workers=args.workers)(
        main, seed=args.seed, target=args.target, max_seconds=args.max_seconds, start_time=launched
    )
    result = next((r for r in results if r is not None), {"reached": False})
    print(f"result: {result}")
    print(f"total wall time {time.time() - launched:.1f} s (Ray start-up included)")
    sys.exit(0 if result.get("reached") else 1)
