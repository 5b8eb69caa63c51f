"""storage.nfs: the schema, the /etc/exports line, and the exact mount commands `cluster up` runs (golden)."""

import os
import subprocess

import pytest
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.cluster import plan
from raytrain.cluster.lifecycle import mount_storage, up
from raytrain.cluster.runner import CommandResult, DryRunner, Runner, SSHRunner
from raytrain.config.cluster import load_cluster
from raytrain.errors import ClusterError, ConfigError

from ..conftest import ROOT

LAB = """
name: lab
head: {host: m10, address: 10.0.0.10, port: 6333}
workers:
  - {host: m8, address: 10.0.0.8}
  - {host: m9, address: 10.0.0.9}
ssh: {user: lab}
venv: /opt/raytrain
storage:
  path: /nfsroot/raytrain
  nfs: {server: 10.0.0.5, export: /nfsroot, mount_point: /nfsroot}
"""
EXPORT_OPTIONS = "rw,sync,no_subtree_check,no_root_squash"


@pytest.fixture
def lab(write_yaml):
    return load_cluster(write_yaml(LAB, "cluster.yaml"))


def with_storage(write_yaml, storage: str):
    return load_cluster(write_yaml(LAB.split("storage:")[0] + storage, "cluster.yaml"))


# --- schema ---------------------------------------------------------------------------------------------
def test_defaults(write_yaml):
    cfg = with_storage(write_yaml, "storage: {path: /data/ckpt, nfs: {server: nas, export: /export/ckpt}}\n")
    nfs = cfg.storage.nfs
    assert (nfs.options, nfs.export_options, nfs.sudo, nfs.mount_point) == ("nolock", EXPORT_OPTIONS, False, None)
    assert cfg.storage.mount_point == "/data/ckpt"  # the share is mounted at storage.path by default
    assert load_cluster(write_yaml("name: x\nhead: {host: a}\n")).storage.mount_point is None


@pytest.mark.parametrize(
    "storage,expected",
    [
        ("{path: /n, nfs: {server: 10.0.0.5, export: nfsroot}}", "cluster.yaml:9: storage.nfs.export: must be an absolute path"),
        ("{nfs: {server: 10.0.0.5, export: /nfsroot}}", "storage.nfs needs storage.path"),
        ("{path: /data/r, nfs: {server: 10.0.0.5, export: /nfsroot, mount_point: /nfsroot}}", "storage.path /data/r is not inside nfs.mount_point /nfsroot"),
        ("{path: /n, nfs: {server: 'nas; reboot', export: /nfsroot}}", "storage.nfs.server: must be a hostname or an address"),
        ("{path: /n, nfs: {server: nas, export: /nfsroot, options: 'rw, hard'}}", "storage.nfs.options: must be a comma-separated option list"),
        ("{path: /n, nfs: {server: nas, export: /nfsroot, export_options: '*'}}", "storage.nfs.export_options: must be a comma-separated"),
        ("{path: /n, nfs: {server: nas, export: /nfsroot, option: hard}}", "storage.nfs.option: unknown key; did you mean 'options'?"),
        ("{path: /n, nfs: {export: /nfsroot}}", "storage.nfs.server: is required"),
        ("{path: /n, nfs: {server: nas, export: /nfsroot, mount_point: '~/n'}}", "storage.nfs.mount_point: must be an absolute path"),
    ],
)
def test_storage_nfs_errors(write_yaml, storage, expected):
    with pytest.raises(ConfigError) as info:
        with_storage(write_yaml, f"storage: {storage}\n")
    assert expected in str(info.value)


# --- the exports line ------------------------------------------------------------------------------------
def test_exports_line_golden(lab):
    assert plan.exports_line(lab) == (
        f"/nfsroot 10.0.0.10({EXPORT_OPTIONS}) 10.0.0.8({EXPORT_OPTIONS}) 10.0.0.9({EXPORT_OPTIONS})"
    )


def test_exports_line_uses_configured_options(write_yaml):
    # Two nodes never share an address (refused by the schema), so each client appears once.
    text = (
        "name: x\nhead: {host: m10, address: 10.0.0.10}\n"
        "workers: [{host: m9, name: second, address: 10.0.0.9}, {host: m8}]\n"
        "storage: {path: /srv/share/r, nfs: {server: m10, export: /srv/share, export_options: 'rw,async'}}\n"
    )
    cfg = load_cluster(write_yaml(text))
    assert plan.exports_line(cfg) == "/srv/share 10.0.0.10(rw,async) 10.0.0.9(rw,async) m8(rw,async)"
    assert plan.exports_line(cfg, "/other", "ro") == "/other 10.0.0.10(ro) 10.0.0.9(ro) m8(ro)"


def test_exports_line_without_storage_nfs_and_never_a_wildcard(write_yaml):
    cfg = load_cluster(write_yaml("name: x\nhead: {host: a, address: 10.0.0.1}\n"))
    assert plan.exports_line(cfg) == f"/nfsroot 10.0.0.1({EXPORT_OPTIONS})"
    # A wildcard, network or netgroup never gets as far as the line: the schema refuses it as a node.
    for field in ("host: '*'", "host: a, address: '*'", "host: a, address: 10.0.0.0/8", "host: a, address: '@lab'"):
        with pytest.raises(ConfigError, match=r"config.yaml:3: workers\.0\.(host|address): must be"):
            load_cluster(write_yaml(f"name: x\nhead: {{host: b}}\nworkers: [{{{field}}}]\n"))
    # And the line itself checks every client once more (a config built in code skips the file's checks).
    built = cfg.model_copy(update={"head": cfg.head.model_copy(update={"address": "10.0.0.0/8"})})
    with pytest.raises(ConfigError, match="not one machine"):
        plan.exports_line(built)


def test_nfs_exports_cli(write_yaml):
    path = str(write_yaml(LAB, "c.yaml"))
    result = CliRunner().invoke(app, ["nfs", "exports", path])
    assert result.exit_code == 0, result.output
    assert result.output == f"/nfsroot 10.0.0.10({EXPORT_OPTIONS}) 10.0.0.8({EXPORT_OPTIONS}) 10.0.0.9({EXPORT_OPTIONS})\n"
    custom = CliRunner().invoke(app, ["nfs", "exports", path, "--export", "/data", "--options", "rw,sync"])
    assert custom.output == "/data 10.0.0.10(rw,sync) 10.0.0.8(rw,sync) 10.0.0.9(rw,sync)\n"
    bad = CliRunner().invoke(app, ["nfs", "exports", path, "--options", "rw sync"])
    assert bad.exit_code == 2 and "--options must be a comma-separated option list" in bad.output


def test_server_script_writes_the_same_line_in_place(tmp_path, lab):
    """nfs/server.sh with the system commands it calls stubbed: the line equals `raytrain nfs exports`;
    a second run changes nothing; another export's line is kept; `*` is refused."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in {"dpkg-query": "printf 'install ok installed'", "exportfs": 'echo "exportfs $*" >> "$STUB_LOG"'}.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    exports = tmp_path / "exports"
    exports.write_text("/srv/other 10.0.0.99(ro)\n/nfsroot *(rw)\n# a comment\n")
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "EXPORTS_FILE": str(exports), "STUB_LOG": str(tmp_path / "log")}
    argv = ["bash", str(ROOT / "nfs" / "server.sh"), "--export", str(tmp_path / "nfsroot"), "10.0.0.10", "10.0.0.8", "10.0.0.9", "10.0.0.8"]
    first = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    line = plan.exports_line(lab, export=str(tmp_path / "nfsroot"))
    assert f"exports: {line}\n" in first.stdout
    assert exports.read_text() == f"/srv/other 10.0.0.99(ro)\n/nfsroot *(rw)\n# a comment\n{line}\n"
    assert oct((tmp_path / "nfsroot").stat().st_mode & 0o7777) == "0o2775"
    second = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert second.returncode == 0 and "already has the line" in second.stderr
    assert exports.read_text().count(line) == 1
    assert (tmp_path / "log").read_text() == "exportfs -ra\nexportfs -v\n" * 2
    wild = subprocess.run([*argv[:4], "*"], capture_output=True, text=True, env=env)
    assert wild.returncode == 2 and "refusing client '*'" in wild.stderr


# --- the mount step ----------------------------------------------------------------------------------------
def test_golden_mount_commands(lab, write_yaml):
    assert plan.nfs_probe(lab) == "findmnt -n -o SOURCE,FSTYPE --mountpoint /nfsroot"
    assert plan.nfs_mount(lab) == "mkdir -p /nfsroot && mount -t nfs -o nolock 10.0.0.5:/nfsroot /nfsroot"
    sudo = with_storage(write_yaml, "storage: {path: '/mnt/lab share', nfs: {server: nas, export: /vol/lab, options: 'nolock,hard,vers=3', sudo: true}}\n")
    assert plan.nfs_mount(sudo) == (
        "sudo -n mkdir -p '/mnt/lab share' && sudo -n mount -t nfs -o nolock,hard,vers=3 nas:/vol/lab '/mnt/lab share'"
    )
    assert SSHRunner(lab.ssh).display(lab.workers[0], plan.nfs_mount(lab)) == (
        "ssh -o BatchMode=yes -o ConnectTimeout=10 -o StrictHostKeyChecking=yes -- lab@m8 "
        "'mkdir -p /nfsroot && mount -t nfs -o nolock 10.0.0.5:/nfsroot /nfsroot'"
    )


def test_dry_run_mounts_before_the_preflight_and_the_head(lab):
    runner = DryRunner(lab.ssh)
    report = up(lab, runner)
    commands = [c for _, c in report.commands]
    mounts = [i for i, c in enumerate(commands) if "mount -t nfs -o nolock 10.0.0.5:/nfsroot /nfsroot" in c]
    assert [report.commands[i][0] for i in mounts] == ["m10", "m8", "m9"]
    first_probe = next(i for i, c in enumerate(commands) if "import json, platform" in c)
    head = next(i for i, c in enumerate(commands) if "ray start --head" in c)
    assert max(mounts) < first_probe < head
    assert [str(m) for m in report.mounts] == [f"{n}: would mount 10.0.0.5:/nfsroot at /nfsroot" for n in ("m10", "m8", "m9")]


def test_up_dry_run_cli_prints_the_mount_commands(write_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["cluster", "up", str(write_yaml(LAB, "c.yaml")), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "[m9] ssh -o BatchMode=yes -o ConnectTimeout=10 -o StrictHostKeyChecking=yes -- lab@m9 'mkdir -p /nfsroot && mount -t nfs -o nolock 10.0.0.5:/nfsroot /nfsroot'" in result.output


class ScriptedRunner(Runner):
    """Answers each (node, command) from a table instead of running it, and records what was asked."""

    def __init__(self, ssh, answers):
        self.ssh, self.answers, self.asked = ssh, answers, []

    def display(self, node, command):
        return SSHRunner(self.ssh).display(node, command)

    def run(self, node, command, *, stdin=None, timeout=None):
        self.asked.append((node.node_name, command))
        kind = "probe" if command.startswith("findmnt") else "mount" if "mount -t nfs" in command else "other"
        rc, out, err = self.answers.get((node.node_name, kind), (0, "", ""))
        return CommandResult(node.node_name, self.display(node, command), rc, out, err)


def test_mount_step_mounts_where_nothing_is_mounted_and_leaves_the_rest(lab):
    runner = ScriptedRunner(lab.ssh, {
        ("m10", "probe"): (0, "10.0.0.5:/nfsroot nfs\n", ""),
        ("m8", "probe"): (1, "", ""),
        ("m9", "probe"): (0, "nas:/other nfs4\n", ""),
    })
    results = mount_storage(lab, runner)
    assert [str(r) for r in results] == [
        "m10: already mounted /nfsroot (10.0.0.5:/nfsroot nfs)",
        "m8: mounted 10.0.0.5:/nfsroot at /nfsroot",
        "m9: already mounted /nfsroot (nas:/other nfs4)",
    ]
    assert [n for n, c in runner.asked if "mount -t nfs" in c] == ["m8"]


def test_mount_failure_names_node_command_exit_code_and_stderr_and_starts_nothing(lab):
    runner = ScriptedRunner(lab.ssh, {
        ("m10", "probe"): (1, "", ""),
        ("m8", "probe"): (1, "", ""),
        ("m8", "mount"): (32, "", "mount.nfs: Connection timed out\n"),
        ("m9", "probe"): (255, "", "ssh: connect to host m9 port 22: No route to host\n"),
    })
    with pytest.raises(ClusterError) as info:
        up(lab, runner)
    text = str(info.value)
    assert text.startswith("could not mount the NFS share 10.0.0.5:/nfsroot at /nfsroot, nothing was started:")
    assert (
        "m8: `ssh -o BatchMode=yes -o ConnectTimeout=10 -o StrictHostKeyChecking=yes -- lab@m8 "
        "'mkdir -p /nfsroot && mount -t nfs -o nolock 10.0.0.5:/nfsroot /nfsroot'` exited 32\n"
        "    mount.nfs: Connection timed out"
    ) in text
    assert "m9: `ssh" in text and "exited 255" in text and "No route to host" in text
    # m10 mounted before the others failed: `up` refuses, so it leaves m10 as it found it.
    assert "(unmounted again where this run had mounted it: m10)" in text
    assert [(n, c) for n, c in runner.asked if c.startswith("umount")] == [("m10", "umount /nfsroot")]
    assert not [c for _, c in runner.asked if "ray" in c]  # no preflight, no token, no `ray start`
    assert [n for n, c in runner.asked if "mount -t nfs" in c] == ["m10", "m8"]  # none where ssh failed


def test_a_failed_preflight_unmounts_only_what_up_mounted(lab):
    """m8 had nothing mounted (up mounts it), m10 had the share already: the preflight fails (ports in
    use on the head), and only m8's mount is undone."""
    class Busy(ScriptedRunner):
        def run(self, node, command, *, stdin=None, timeout=None):
            res = super().run(node, command, stdin=stdin, timeout=timeout)
            if "socket" in command and "bind" in command:  # the port probe: every port is busy
                return CommandResult(node.node_name, res.command, 0, "[6379]", "")
            if "metadata" in command:  # the version probe
                return CommandResult(node.node_name, res.command, 0, '{"python": "3.11.7", "ray": "2.60.0", "hostname": "h"}', "")
            return res

    runner = Busy(lab.ssh, {
        ("m10", "probe"): (0, "10.0.0.5:/nfsroot nfs\n", ""),
        ("m8", "probe"): (1, "", ""),
        ("m9", "probe"): (0, "10.0.0.5:/nfsroot nfs\n", ""),
    })
    with pytest.raises(ClusterError) as info:
        up(lab, runner)
    assert "preflight failed, nothing was started" in str(info.value)
    assert "(the NFS share was unmounted again on m8)" in str(info.value)
    assert [(n, c) for n, c in runner.asked if c.startswith("umount")] == [("m8", "umount /nfsroot")]


def test_the_nfs_server_node_uses_its_export_in_place(write_yaml):
    cfg = with_storage(write_yaml, "storage: {path: /nfsroot/r, nfs: {server: 10.0.0.10, export: /nfsroot, mount_point: /nfsroot}}\n")
    runner = ScriptedRunner(cfg.ssh, {("m8", "probe"): (1, "", ""), ("m9", "probe"): (1, "", "")})
    results = mount_storage(cfg, runner)
    assert str(results[0]) == "m10: nfs server (uses /nfsroot in place)"
    assert "m10" not in [n for n, _ in runner.asked]
    # Mounted elsewhere than its export, the server mounts its own share like every node.
    other = with_storage(write_yaml, "storage: {path: /mnt/r, nfs: {server: 10.0.0.10, export: /nfsroot}}\n")
    assert not plan.is_nfs_server(other, other.head)
