"""Time from `sbatch` to every Ray node alive and to the first trial result: `raytrain tune --slurm` against a
hand-written sbatch script of Ray's documented Slurm recipe (docs.ray.io, "Deploying on Slurm": head by srun,
`sleep 10`, a worker per node by srun with `sleep 5` between them, then the driver), on the same 3-node
allocation of a real Slurm started here (tests/integration/slurmlab.py; needs root).

    python scripts/bench_slurm.py [--runs 1]

Goal: raytrain's times <= 1.2x the recipe's.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.conftest import tiny_base  # noqa: E402
from tests.integration.slurmlab import SlurmLab, cannot_run  # noqa: E402

RECIPE = """#!/bin/bash
#SBATCH --job-name=ray-recipe
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
set -x
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 OMP_NUM_THREADS=1
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes_array=($nodes)
head_node=${{nodes_array[0]}}
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address)
port=6379
ip_head=$head_node_ip:$port
export ip_head
srun --nodes=1 --ntasks=1 -w "$head_node" {ray} start --head --node-ip-address="$head_node_ip" --port=$port \\
    --num-cpus "${{SLURM_CPUS_PER_TASK}}" --block &
sleep 10
worker_num=$((SLURM_JOB_NUM_NODES - 1))
for ((i = 1; i <= worker_num; i++)); do
    node_i=${{nodes_array[$i]}}
    srun --nodes=1 --ntasks=1 -w "$node_i" {ray} start --address "$ip_head" --num-cpus "${{SLURM_CPUS_PER_TASK}}" --block &
    sleep 5
done
{python} -c "
import time, ray
ray.init(address='$ip_head', logging_level='ERROR')
while len([n for n in ray.nodes() if n['Alive']]) < 3:
    time.sleep(0.2)
print('ALIVE', time.time(), flush=True)
"
{python} -m raytrain tune {sweep} --address "$ip_head" --set name=recipe
"""


def wait_done(lab: SlurmLab, job: str) -> None:
    while True:
        state = json.loads(lab.raytrain("slurm", "status", job, "--json").stdout)["state"]
        if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return
        time.sleep(1)


def first_result(exp: Path) -> float:
    stamps = []
    for path in exp.glob("*/result.json"):
        line = path.read_text().splitlines()[:1]
        if line:
            stamps.append(json.loads(line[0])["timestamp"])
    return min(stamps)


def one_run(lab: SlurmLab, tmp: Path, i: int) -> dict[str, float]:
    storage = tmp / f"run{i}"
    storage.mkdir()
    (storage / "base.yaml").write_text(tiny_base(1, 1))
    sweep = storage / "sweep.yaml"
    sweep.write_text("base: base.yaml\nsearch: {num_samples: 3}\nspace: {training.lr: {distribution: grid, values: [0.001, 0.002, 0.003]}}\n"
                     f"checkpoint: {{storage_path: {storage}}}\nname: rt\n")
    slurm = storage / "slurm.yaml"
    slurm.write_text(json.dumps({"nodes": 3, "cpus_per_node": 1, "venv": sys.prefix, "env": {"OMP_NUM_THREADS": "1"}}))
    out: dict[str, float] = {}

    t0 = time.time()
    res = lab.raytrain("tune", str(sweep), "--slurm", str(slurm))
    job = res.stdout.strip().splitlines()[-1]
    wait_done(lab, job)
    log = (storage / "rt" / f"slurm-{job}.out").read_text()
    assert "Ray is alive on all 3 nodes" in log, log[-3000:]
    out["raytrain_alive_s"] = _alive_time(log, t0)
    out["raytrain_first_result_s"] = first_result(storage / "rt") - t0

    script = storage / "recipe.sh"
    script.write_text(RECIPE.format(ray=Path(sys.prefix) / "bin" / "ray", python=Path(sys.prefix) / "bin" / "python", sweep=sweep))
    t0 = time.time()
    res = lab.slurm("sbatch", "--parsable", f"--output={storage}/recipe-%j.out", f"--chdir={storage}", str(script))
    job = res.stdout.strip()
    wait_done(lab, job)
    log = (storage / f"recipe-{job}.out").read_text()
    m = re.search(r"^ALIVE ([0-9.]+)$", log, re.M)
    assert m, log[-3000:]
    out["recipe_alive_s"] = float(m.group(1)) - t0
    out["recipe_first_result_s"] = first_result(storage / "recipe") - t0
    return out


def _alive_time(log: str, t0: float) -> float:
    """Seconds from sbatch to the job's `Ray is alive on all nodes` line (it prints the epoch time)."""
    return float(re.search(r"Ray is alive on all 3 nodes after [0-9.]+ s \[t=([0-9.]+)\]", log).group(1)) - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    why = cannot_run()
    if why:
        print(f"cannot run: {why}")
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="bench_slurm_"))
    lab = SlurmLab(tmp / "lab")
    lab.up()
    try:
        runs = [one_run(lab, tmp, i) for i in range(args.runs)]
    finally:
        lab.down()
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(json.dumps({"runs": runs, "median": med}, indent=2))
    for what in ("alive", "first_result"):
        r, d = med[f"raytrain_{what}_s"], med[f"recipe_{what}_s"]
        print(f"sbatch -> {what.replace('_', ' ')}: raytrain {r:.1f} s, Ray's recipe {d:.1f} s, ratio {r / d:.2f} (goal <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
