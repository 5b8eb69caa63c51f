"""Agent and observers on CartPole-v1, written as DI-engine-style middleware on `raytrain.framework`.

Node 0, the agent, holds a small linear policy. Each round it broadcasts the policy's weights
(`task.emit("policy", state_dict, round_id=..., noise_seed=..., noise_std=...)`); each observer (nodes 1..)
adds its own noise to them (seeded by the round and its node id, so the agent can rebuild it), runs CartPole
episodes with the result and sends the returns back (`task.emit("reward", ...)`). The agent prints every
round's rewards and keeps the best perturbation (random-search hill climbing), and after a fixed number of
rounds ends the run on every node. With one node, that node is the agent and an observer at once.

Run it:

    python examples/agent_observer.py 4          # an agent and 3 observers
    raytrain run examples/agent_observer.py --main main --workers 4

Plain torch and gymnasium.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from raytrain.framework import Context, Parallel, Task, task


@dataclass
class AgentObserverConfig:
    """Everything `main` accepts as keyword arguments."""

    seed: int = 0
    """Seed of the initial policy, of the noise and of the observers' episodes."""
    rounds: int = 10
    """Rounds the agent runs before it ends the run."""
    episodes: int = 5
    """Episodes each observer runs per round."""
    noise_std: float = 0.5
    """Scale of the Gaussian noise each observer adds to the weights it receives."""
    reward_timeout_s: float = 60.0
    """How long the agent waits for the observers' rewards of a round before going on without the missing."""
    policy_timeout_s: float = 120.0
    """How long an observer waits for the next policy before it gives up (it also stops on task.finish)."""


def make_policy(seed: int) -> nn.Linear:
    """The small policy: a linear map from CartPole's 4 observations to 2 action logits (greedy actions)."""
    torch.manual_seed(seed)
    return nn.Linear(4, 2)


def perturbed(state_dict: dict[str, torch.Tensor], seed: int, std: float) -> dict[str, torch.Tensor]:
    """`state_dict` plus Gaussian noise drawn from `seed`: the agent and an observer get the same result."""
    generator = torch.Generator().manual_seed(seed)
    return {k: v + std * torch.randn(v.shape, generator=generator) for k, v in state_dict.items()}


def noise_seed_of(cfg: AgentObserverConfig, round_: int, observer: int) -> int:
    return (cfg.seed * 1_000 + round_) * 1_000 + observer


def node_id_of(task: Task) -> int:
    return task.router.node_id if task.router.is_active else 0


def log(task: Task, message: str) -> None:
    print(f"[node.{node_id_of(task)}] {message}", flush=True)


# -- agent ---------------------------------------------------------------------------------------------
def policy_broadcaster(task: Task, cfg: AgentObserverConfig, policy: nn.Module) -> Callable[[Context], None]:
    """Send the agent's current weights to the observers; one round per step.

    Input of ctx:
        - total_step (int): the round number.
    Output of ctx:
        - round (int): the round whose rewards this step waits for.
        - weights (dict[str, torch.Tensor]): the weights sent (before each observer's noise).
    """

    def _broadcast(ctx: Context) -> None:
        ctx.round = ctx.total_step
        ctx.weights = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        task.emit(
            "policy",
            ctx.weights,
            round_id=ctx.round,
            noise_seed=noise_seed_of(cfg, ctx.round, 0),
            noise_std=cfg.noise_std,
        )

    return _broadcast


class RewardCollector:
    """Gather the observers' `"reward"` events of this round (waits for all of them, up to a timeout).

    Input of ctx:
        - round (int).
    Output of ctx:
        - rewards (dict[int, float]): mean episode return per observer node id for this round.
        - episodes (dict[int, list[float]]): every episode return per observer.
    """

    def __init__(self, task: Task, cfg: AgentObserverConfig, observers: list[int]):
        self._task = task
        self._cfg = cfg
        self._observers = observers
        self._cv = threading.Condition()
        self._received: dict[int, dict[int, list[float]]] = {}
        task.on("reward", self._on_reward)

    def _on_reward(self, mean_return: float, round_id: int, observer: int, returns=()) -> None:
        with self._cv:
            self._received.setdefault(round_id, {})[observer] = list(returns) or [mean_return]
            self._cv.notify_all()

    def __call__(self, ctx: Context) -> None:
        deadline = time.monotonic() + self._cfg.reward_timeout_s
        with self._cv:
            while len(self._received.get(ctx.round, {})) < len(self._observers) and not self._task.finish:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(self._observers) - set(self._received.get(ctx.round, {})))
                    log(
                        self._task,
                        f"round {ctx.round}: no reward from observers {missing} after "
                        f"{self._cfg.reward_timeout_s:g} s; going on without them",
                    )
                    break
                self._cv.wait(min(left, 0.1))
            got = self._received.pop(ctx.round, {})
            for old in [r for r in self._received if r < ctx.round]:  # late answers of earlier rounds
                del self._received[old]
        ctx.episodes = got
        ctx.rewards = {obs: float(np.mean(returns)) for obs, returns in sorted(got.items())}


class HillClimber:
    """Keep the best perturbation seen so far: the policy becomes the best observer's weights if they beat it.

    Input of ctx:
        - round (int), weights (dict), rewards (dict[int, float]).
    Output of ctx:
        - eval_value (float): the best reward of this round (-inf when no observer answered).
        - best_reward (float): the best reward so far (the policy's weights are the ones that earned it).
        - adopted (int | None): the observer whose weights the policy took in this round.
    """

    def __init__(self, cfg: AgentObserverConfig, policy: nn.Module):
        self._cfg = cfg
        self._policy = policy
        self._best = -float("inf")

    def __call__(self, ctx: Context) -> None:
        ctx.adopted = None
        ctx.eval_value = max(ctx.rewards.values(), default=-float("inf"))
        if ctx.rewards and ctx.eval_value > self._best:
            winner = max(ctx.rewards, key=ctx.rewards.get)
            self._policy.load_state_dict(
                perturbed(ctx.weights, noise_seed_of(self._cfg, ctx.round, winner), self._cfg.noise_std)
            )
            self._best, ctx.adopted = ctx.eval_value, winner
        ctx.best_reward = self._best


def reward_logger(task: Task) -> Callable[[Context], None]:
    """Print the round's rewards.

    Input of ctx:
        - round (int), rewards (dict[int, float]), best_reward (float), adopted (int | None).
    Output of ctx: none.
    """

    def _log(ctx: Context) -> None:
        per_observer = "  ".join(f"obs{k}={v:5.1f}" for k, v in ctx.rewards.items())
        mean = np.mean(list(ctx.rewards.values())) if ctx.rewards else float("nan")
        adopted = f"  -> policy takes observer {ctx.adopted}'s weights" if ctx.adopted is not None else ""
        log(
            task, f"round {ctx.round:3d}  {per_observer}  mean {mean:5.1f}  best so far {ctx.best_reward:5.1f}{adopted}"
        )

    return _log


# -- observer ------------------------------------------------------------------------------------------
class PolicyReceiver:
    """Observer: wait for the agent's next `"policy"` and load it, with this observer's noise, into the policy.

    Input of ctx: none.
    Output of ctx:
        - round (int | None): the round of the policy loaded (None when the run finished while waiting).
    """

    def __init__(self, task: Task, cfg: AgentObserverConfig, policy: nn.Module):
        self._task = task
        self._cfg = cfg
        self._policy = policy
        self._cv = threading.Condition()
        self._latest: tuple | None = None
        self._last_round = -1
        task.on("policy", self._on_policy)

    def _on_policy(self, state_dict: dict, round_id: int, noise_seed: int, noise_std: float) -> None:
        with self._cv:
            self._latest = (state_dict, round_id, noise_seed, noise_std)
            self._cv.notify_all()

    def __call__(self, ctx: Context) -> None:
        ctx.round = None
        deadline = time.monotonic() + self._cfg.policy_timeout_s
        with self._cv:
            while (self._latest is None or self._latest[1] <= self._last_round) and not self._task.finish:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"observer: no policy from the agent in {self._cfg.policy_timeout_s:g} s")
                self._cv.wait(min(left, 0.1))
            if self._latest is None or self._latest[1] <= self._last_round:
                return
            state_dict, round_, noise_seed, noise_std = self._latest
        observer = node_id_of(self._task)
        self._policy.load_state_dict(perturbed(state_dict, noise_seed + observer, noise_std))
        self._last_round = ctx.round = round_


class EpisodeRunner:
    """Run CartPole episodes with the loaded policy (greedy actions).

    Input of ctx:
        - round (int | None): nothing runs when None.
    Output of ctx:
        - episodes (list[float]): the returns of this round's episodes.
    """

    def __init__(self, cfg: AgentObserverConfig, policy: nn.Module, seed: int):
        self._cfg = cfg
        self._policy = policy
        self._env = gym.make("CartPole-v1")
        self._seed = seed

    @torch.no_grad()
    def __call__(self, ctx: Context) -> None:
        ctx.episodes = []
        if ctx.round is None:
            return
        for _ in range(self._cfg.episodes):
            obs, _ = self._env.reset(seed=self._seed)
            self._seed += 1
            total, done = 0.0, False
            while not done:
                action = int(self._policy(torch.as_tensor(obs)).argmax())
                obs, reward, terminated, truncated, _ = self._env.step(action)
                total += float(reward)
                done = terminated or truncated
            ctx.episodes.append(total)


def reward_reporter(task: Task) -> Callable[[Context], None]:
    """Send this round's episode returns to the agent.

    Input of ctx:
        - round (int | None), episodes (list[float]).
    Output of ctx: none (emits `"reward"` with the mean return and, as keywords, `round_id`, `observer` (this
    node's id) and `returns`).
    """

    def _report(ctx: Context) -> None:
        if ctx.round is None:
            return
        task.emit(
            "reward",
            float(np.mean(ctx.episodes)),
            round_id=ctx.round,
            observer=node_id_of(task),
            returns=ctx.episodes,
        )

    return _report


# -- main ----------------------------------------------------------------------------------------------
def main(**kwargs) -> dict | None:
    """Run this node's part: node 0 is the agent, the others observers (one node: both).

    Args:
        **kwargs: any field of `AgentObserverConfig` (seed, rounds, episodes, noise_std, ...).

    Returns:
        On the agent, `{"rounds": ..., "best_reward": ..., "rewards": [per round]}`; None on observers.
    """
    cfg = AgentObserverConfig(**kwargs)
    torch.set_num_threads(1)
    router = task.router
    node_ids = sorted(router.node_ids) if router.is_active else [0]
    me = node_id_of(task)
    is_agent = me == node_ids[0]
    is_observer = len(node_ids) == 1 or not is_agent
    history: list[dict[int, float]] = []
    with task.start(ctx=Context()):
        log(task, "agent and observer" if is_agent and is_observer else "agent" if is_agent else "observer")
        policy = make_policy(cfg.seed)
        if is_agent:
            task.use(policy_broadcaster(task, cfg, policy))
        if is_observer:
            local = make_policy(cfg.seed)
            task.use(PolicyReceiver(task, cfg, local))
            task.use(EpisodeRunner(cfg, local, seed=cfg.seed * 100_000 + me * 1_000))
            task.use(reward_reporter(task))
        if is_agent:
            observers = node_ids if len(node_ids) == 1 else node_ids[1:]
            task.use(RewardCollector(task, cfg, observers))
            task.use(HillClimber(cfg, policy))
            task.use(reward_logger(task))
            task.use(lambda ctx: history.append(ctx.rewards))
            # run(max_step=N) sets task.finish after the N-th round, which ends every observer's run too.
            task.run(max_step=cfg.rounds)
            best = max((max(r.values()) for r in history if r), default=float("nan"))
            log(task, f"done: {cfg.rounds} rounds, best observer reward {best:.1f}")
            return {"rounds": cfg.rounds, "best_reward": best, "rewards": history}
        task.run()
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workers", nargs="?", type=int, default=4, help="nodes: the agent and the observers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    launched = time.time()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # keep every node's lines
    if args.workers > 1:  # one worker runs in this process, without Ray
        import ray

        ray.init(num_cpus=2, include_dashboard=False)
    results = Parallel.runner(n_parallel_workers=args.workers)(main, seed=args.seed, rounds=args.rounds)
    print(f"agent result: best reward {results[0]['best_reward']:.1f} over {results[0]['rounds']} rounds")
    print(f"total wall time {time.time() - launched:.1f} s")
