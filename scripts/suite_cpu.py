"""Where a command's CPU goes, by kind of process: run it (the test suite, a sweep) and read /proc while it runs.

Every `--interval` seconds each process's CPU time so far (utime + stime in /proc/PID/stat) is read, and its kind
from its command line, read again each time: a Ray worker renames itself once it holds an actor or runs a task
(`ray::RaytrainPPO`, `ray::SingleAgentEnvRunner`, `ray::IDLE`). At the end each process counts with the CPU time and
the kind last read, summed by kind. Prints the kinds by CPU seconds, with how many processes each had, beside the machine's own
busy time over the same window (/proc/stat): what the sampling missed (processes that lived less than an interval,
the CPU a process spent after its last read) is the difference. It reads the whole machine, not only the command's
processes (of those running before it, only what they spend meanwhile counts): run nothing else beside it.

Usage:
    python scripts/suite_cpu.py [--interval 1] [--top 40] -- python -m pytest -n 2 --dist loadscope -m "not alone" tests
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")

RAY_OWN = {
    "gcs_server": "ray: gcs_server",
    "raylet": "ray: raylet",
    "dashboard/agent.py": "ray: dashboard agent",
    "runtime_env/agent": "ray: runtime env agent",
    "dashboard/dashboard.py": "ray: dashboard",
    "log_monitor.py": "ray: log monitor",
    "autoscaler/_private/monitor.py": "ray: autoscaler monitor",
}
"""Ray's own processes, by a part of their command line. Checked after the worker forms (a worker's command line
names the raylet's socket)."""

AGENTS = {"DashboardAgent": "ray: dashboard agent", "RuntimeEnvAgent": "ray: runtime env agent"}
"""Ray's two agents name themselves as an actor would (`ray::DashboardAgent`)."""

LAB = ("sshd", "slurmd", "slurmctld", "slurmstepd", "munged", "ganesha.nfsd", "rpcbind", "chromium", "chromedriver",
       "raytrain-chromium", "apt-get", "dpkg", "mandb")
"""The labs' own programs and their installs, by the start of their executable's name."""

PYTHON_MODULES = {"pytest": "pytest (main process)", "pip": "pip (the install)", "compileall": "compileall (the install)"}


def _subcommand(args: list[str]) -> str:
    """The leading subcommand words of a command's arguments (`tune resume`, `cluster up`), none of its values."""
    words = []
    for arg in args[:2]:
        if not re.fullmatch(r"[a-z][a-z-]*", arg):
            break
        words.append(arg)
    return " ".join(words)


def kind(cmdline: list[str]) -> str:
    """The kind of a process, from its command line (argv)."""
    line = " ".join(cmdline)
    worker = re.match(r"ray::([\w-]+)", line)
    if worker:  # an actor by its class, a task by its function, or an idle worker
        return AGENTS.get(worker.group(1), f"ray worker: {worker.group(1)}")
    if "default_worker.py" in line:
        return "ray worker: starting"
    if line.startswith("ray-dashboard-"):  # the dashboard's head modules, each a process
        return "ray: dashboard"
    for part, name in RAY_OWN.items():
        if part in line:
            return name
    args = cmdline[1:]
    if args[:1] == ["-m"] and len(args) > 1:  # python -m MODULE
        module, rest = args[1], args[2:]
    elif args and os.path.basename(args[0]) in ("ray", "raytrain"):  # python .../bin/ray start (a console script)
        module, rest = os.path.basename(args[0]), args[1:]
    else:
        module, rest = "", []
    if module == "raytrain":
        return f"raytrain {_subcommand(rest)}".rstrip()
    if module == "ray":
        return f"ray: the `ray` command ({_subcommand(rest) or '?'})"
    if module in PYTHON_MODULES:
        return PYTHON_MODULES[module]
    if "exec(eval(sys.stdin.readline()))" in line:
        return "pytest (xdist worker: the tests' own code, commands run in-process)"
    exe = os.path.basename(cmdline[0].split()[0]) if cmdline else ""  # some rewrite their argv as one string
    lab = next((name for name in LAB if exe.startswith(name)), None)
    if lab:
        return f"lab: {lab.removeprefix('raytrain-')}"
    if args[:1] == ["-c"]:
        return f"{exe} -c (a script given inline: the tests' helpers)"
    return exe or "?"


def read_process(pid: str) -> tuple[str, float, list[str]] | None:
    """(its start time, CPU seconds so far, argv), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19], (int(fields[11]) + int(fields[12])) / HZ, [a.decode(errors="replace") for a in argv if a]


def busy_seconds() -> float:
    """The whole machine's busy CPU seconds since boot: /proc/stat's user, nice, system, irq and softirq (its guest
    time is in user already; idle, iowait and steal are not busy here)."""
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in Path("/proc/stat").read_text().split()[1:8])
    return (user + nice + system + irq + softirq) / HZ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between two reads of /proc")
    parser.add_argument("--top", type=int, default=40, help="how many kinds to list")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")

    seen: dict[tuple[str, str], tuple[str, float]] = {}  # (pid, start) -> (kind, CPU s); PIDs are reused, starts not
    me = str(os.getpid())
    before: dict[tuple[str, str], float] = {}  # what the processes running already had spent: not the command's
    for pid in os.listdir("/proc"):
        found = read_process(pid) if pid.isdigit() else None
        if found is not None:
            before[(pid, found[0])] = found[1]
    busy0 = busy_seconds()
    start = time.monotonic()
    proc = subprocess.Popen(command)
    while True:
        done = proc.poll() is not None
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == me:
                continue
            found = read_process(pid)
            if found is None or not found[2]:  # gone, or a kernel thread
                continue
            started, spent, argv = found
            seen[(pid, started)] = (kind(argv), spent)  # the last read wins: a process renames itself (a Ray worker
            # taking work, sshd, chromium), and one read between its fork and its exec still has its parent's name
        if done:
            break
        time.sleep(args.interval)
    wall = time.monotonic() - start
    busy1 = busy_seconds()

    cpu: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for key, (name, seconds) in seen.items():
        cpu[name] += seconds - before.get(key, 0.0)
        count[name] += 1
    total = sum(cpu.values())
    busy = busy1 - busy0
    cpus = os.cpu_count() or 1
    print(f"\nwall {wall:.0f} s on {cpus} CPUs; the machine was busy {busy:.0f} CPU s ({busy / (wall * cpus):.0%}); "
          f"the processes read add up to {total:.0f} CPU s (the rest: processes shorter than {args.interval:g} s, "
          "and CPU after a process's last read)\n")
    print(" CPU s  share  processes  kind")
    for name, seconds in sorted(cpu.items(), key=lambda item: item[1], reverse=True)[:args.top]:
        print(f"{seconds:6.0f}  {seconds / total:5.1%}  {count[name]:9d}  {name}")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
