"""A cluster file can never run a command it did not mean to (issue 11).

Every value is either refused by the schema (exit 2, file:line, the field, what is allowed) or quoted where the
command line is assembled (`plan.line`); ssh gets `--` before its destination; the dashboard's exposure is judged
by `ipaddress`; NFS exports name single hosts; ports, addresses, names and the token's files are checked.
Commands here really run (bash, ssh, nfs/server.sh); nothing connects anywhere.
"""

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.cluster import lifecycle, plan
from raytrain.cluster.runner import DryRunner, SSHRunner, ssh_argv
from raytrain.config.cluster import ClusterConfig, NodeConfig, SSHConfig, load_cluster
from raytrain.errors import ClusterError, ConfigError

from ..conftest import ROOT
from ..ports import free_port


def refused(write_yaml, text: str) -> str:
    """The message of the ConfigError a cluster file raises (the test fails if it loads)."""
    with pytest.raises(ConfigError) as info:
        load_cluster(write_yaml(text, "c.yaml"), starting=True)
    assert info.value.exit_code == 2
    return str(info.value)


# --- 1. the schema refuses what cannot be legitimate ----------------------------------------------------
@pytest.mark.parametrize(
    "head,expected",
    [
        ("{host: m10, address: '127.0.0.1; touch /tmp/pwned'}", "c.yaml:2: head.address: must be an IP address (e.g. 10.0.0.5) or a hostname"),
        ("{host: m10, address: '$(touch x)'}", "head.address: must be an IP address"),
        ("{host: m10, address: '0'}", "head.address: is not a canonical IP address: write it as four decimal numbers"),
        ("{host: m10, address: '127.1'}", "head.address: is not a canonical IP address"),
        ("{host: m10, address: '0x7f000001'}", "head.address: is not a canonical IP address"),
        ("{host: m10, address: '10.0.0.0/8'}", "head.address: must be an IP address"),
        ("{host: '-oProxyCommand=touch /tmp/pwned'}", "c.yaml:2: head.host: must be an SSH alias, a hostname or an IP address"),
        ("{host: 'm10 -oProxyCommand=x'}", "head.host: must be an SSH alias"),
        ("{host: 'lab@m10'}", "the login user goes in ssh.user"),
        ("{host: \"m10\\ntouch x\"}", "head.host: must be an SSH alias"),
        ("{host: m10, name: \"a\\nb\"}", "head.name: must be letters, digits and `_.:-`"),
        ("{host: m10, dashboard: {host: '0'}}", "head.dashboard.host: must be an IP address: 127.0.0.1"),
        ("{host: m10, dashboard: {host: localhost}}", "head.dashboard.host: must be an IP address"),
        ("{host: m10, dashboard: {host: '0.0.0.0 --x'}}", "head.dashboard.host: must be an IP address"),
        ("{host: m10, labels: {'a,b': c}}", "head.labels: label key 'a,b'"),
        ("{host: m10, labels: {k: 'v,x=y'}}", "head.labels: label k's value 'v,x=y'"),
        ("{host: m10, resources: {'a b': 1}}", "head.resources: resource names must be letters"),
        ("{host: m10, resources: {CPU: 1}}", "use num_cpus, num_gpus or object_store_memory instead"),
    ],
)
def test_node_values_refused(write_yaml, head, expected):
    assert expected in refused(write_yaml, f"name: x\nhead: {head}\n")


@pytest.mark.parametrize(
    "extra,expected",
    [
        ("ssh: {user: '-oProxyCommand=touch /tmp/pwned'}", "c.yaml:3: ssh.user: must be a user name: letters, digits and `_.-`"),
        ("ssh: {user: 'lab;id'}", "ssh.user: must be a user name"),
        ("ssh: {user: " + "a" * 33 + "}", "ssh.user: must be a user name"),
        ("ssh: {identity_file: id_ed25519}", "ssh.identity_file: must be an absolute path (starting with /) or ~/"),
        ("ssh: {config_file: \"/etc/ssh\\nconfig\"}", "ssh.config_file: must not contain control characters"),
        ("env: {'A B': '1'}", "c.yaml:3: env: variable names must be letters, digits and `_`"),
        ("venv: relative/venv", "c.yaml:3: venv: must be an absolute path (starting with /)"),
        ("python: \"/usr/bin/python3\\n\"", "python: must not contain control characters"),
        ("env: {'X;touch /tmp/pwned': '1'}", "c.yaml:3: env: variable names must be letters, digits and `_`"),
        ("env: {1X: '1'}", "env: variable names"),
        ("env: {X: \"a\\0b\"}", "env: values must not contain a NUL byte"),
        # it replaced raytrain's own RAY_AUTH_MODE=token in every command: auth off past the check of auth.mode
        ("env: {RAY_AUTH_MODE: disabled}", "c.yaml:3: env: ['RAY_AUTH_MODE']: set by raytrain itself for every Ray "
                                           "process: use `auth:` for authentication, and leave these out"),
        ("env: {RAY_AUTH_TOKEN_PATH: /tmp/t, OMP_NUM_THREADS: '1'}", "env: ['RAY_AUTH_TOKEN_PATH']: set by raytrain"),
        ("env: {RAY_ADDRESS: '10.0.0.1:6379'}", "env: ['RAY_ADDRESS']: set by raytrain itself"),
        ("start_timeout_s: .inf", "c.yaml:3: start_timeout_s: Input should be a finite number (got inf)"),
        # said at the file alone, without a line
        ("python: /usr/bin/python3\nvenv: /opt/venv", "c.yaml:4: venv: give `python` or `venv`, not both"),
        # mounted over /etc, or over / on every node
        ("storage: {path: /nfsroot/../etc, nfs: {server: nas, export: /nfsroot}}",
         "c.yaml:3: storage.path: /nfsroot/../etc is not written plainly (/etc is what it names): write /etc"),
        ("storage: {path: /raytrain, nfs: {server: nas, export: /, mount_point: /}}",
         "c.yaml:3: storage.nfs.mount_point: / is a folder of the system's own: the share mounted there would hide "
         "what it holds on every node; mount it at a folder of its own, e.g. /mnt/raytrain or /shared/raytrain"),
        ("storage: {path: /usr/lib/ckpt, nfs: {server: nas, export: /n}}", "c.yaml:3: storage.path: /usr/lib/ckpt is a "
         "folder of the system's own"),
        ("storage: {path: /home/, nfs: {server: nas, export: /n}}", "storage.path: /home is a folder of the system's own"),
        ("storage: {path: /a/./b}", "storage.path: /a/./b is not written plainly (/a/b is what it names)"),
        ("storage: {path: /n, nfs: {server: '2001:db8::1', export: /n}}",
         "storage.nfs.server: an IPv6 address is written in brackets here: [2001:db8::1] (the share is "
         "[2001:db8::1]:EXPORT)"),
        ("storage: {path: /n, nfs: {server: nas, export: /n, mount_timeout_s: .nan}}",
         "storage.nfs.mount_timeout_s: Input should be a finite number"),
        ("storage: {path: '~/ckpt'}", "storage.path: must be an absolute path (starting with /)"),
        ("storage: {path: \"/data\\tx\"}", "storage.path: must not contain control characters"),
        ("storage: {path: /n, nfs: {server: '-oro', export: /n}}", "storage.nfs.server: must be a hostname or an address"),
        ("storage: {path: /n, nfs: {server: 0.0.0.0/0, export: /n}}", "storage.nfs.server: must be a hostname or an address"),
        ("storage: {path: /n, nfs: {server: nas, export: '/n *(rw)'}}", "storage.nfs.export: must be an absolute path (starting with /) of letters, digits and `._/-`"),
        ("name: ..", "name: must be letters, digits and `_.-` (at most 64), not starting with `.` or `-`"),
    ],
)
def test_file_values_refused(write_yaml, extra, expected):
    text = f"name: x\nhead: {{host: m10}}\n{extra}\n"
    if extra.startswith("name:"):
        text = f"{extra}\nhead: {{host: m10}}\n"
    assert expected in refused(write_yaml, text)


# Each a legitimate value with a newline after it: a pattern anchored with `$` takes that (`$` matches before a
# string's last newline), and every one of these did.
@pytest.mark.parametrize(
    "text,expected",
    [
        ("name: x\nhead: {host: \"m10\\n\"}\n", "head.host: must be an SSH alias"),
        ("name: x\nhead: {host: m10, address: \"m10.lab\\n\"}\n", "head.address: must be an IP address"),
        ("name: x\nhead: {host: m10, name: \"m10\\n\"}\n", "head.name: must be letters, digits and `_.:-`"),
        ("name: x\nhead: {host: m10, resources: {\"w1\\n\": 1}}\n", "head.resources: resource names must be letters"),
        ("name: x\nhead: {host: m10, labels: {\"rack\\n\": a}}\n", "head.labels: label key"),
        ("name: x\nhead: {host: m10, labels: {rack: \"a\\n\"}}\n", "head.labels: label rack's value"),
        ("name: \"x\\n\"\nhead: {host: m10}\n", "name: must be letters, digits"),
        ("name: x\nhead: {host: m10}\nssh: {user: \"lab\\n\"}\n", "ssh.user: must be a user name"),
        ("name: x\nhead: {host: m10}\nenv: {\"OMP\\n\": '1'}\n", "env: variable names must be letters"),
        ("name: x\nhead: {host: m10}\nstorage: {path: /n, nfs: {server: \"nas\\n\", export: /n}}\n",
         "storage.nfs.server: must be a hostname or an address"),
        ("name: x\nhead: {host: m10}\nstorage: {path: /n, nfs: {server: nas, export: \"/n\\n\"}}\n",
         "storage.nfs.export: must be an absolute path"),
    ],
)
def test_a_value_with_a_newline_after_it_is_refused(write_yaml, text, expected):
    assert expected in refused(write_yaml, text)


@pytest.mark.parametrize("name", [".", "..", "a/b", "-x", ".hidden", "a b", "x" * 65])
def test_cluster_name_is_one_path_component(write_yaml, name):
    assert "name: must be letters, digits" in refused(write_yaml, f"name: {name!r}\nhead: {{host: m10}}\n")


def test_legitimate_values_still_load(write_yaml):
    cfg = load_cluster(write_yaml(
        "name: lab-2.a_b\n"
        "head: {host: m10.lab.example, address: 192.168.1.10, name: 'm10:head', labels: {rack: a1, zone/x.y: b-2}}\n"
        "workers: [{host: '2001:db8::8', address: '2001:db8::8'}, {host: w_9, address: w9.lab}]\n"
        "ssh: {user: lab_user, identity_file: ~/.ssh/id_ed25519, config_file: /etc/ssh/lab_config}\n"
        "venv: /opt/ray train\nenv: {OMP_NUM_THREADS: '1', NOTE: 'has $(x) and `y`; fine'}\n"
        "storage: {path: /nfs root/r, nfs: {server: '[2001:db8::5]', export: /vol/lab, mount_point: /nfs root}}\n",
        "c.yaml",
    ))
    assert cfg.ssh.identity_file == os.path.expanduser("~/.ssh/id_ed25519")  # ssh reads it on this machine
    assert cfg.head.dashboard.host == "127.0.0.1"


def test_a_refusal_exits_2_naming_file_line_field_and_what_is_allowed(write_yaml):
    path = write_yaml("name: x\nhead:\n  host: m10\n  address: '127.0.0.1; touch /tmp/pwned'\n", "c.yaml")
    for args in (["cluster", "check", str(path)], ["cluster", "up", str(path), "--dry-run"], ["cluster", "status", str(path)],
                 ["cluster", "exec", str(path), "--dry-run", "--", "uptime"], ["nfs", "exports", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert f"{path}:4: head.address: must be an IP address (e.g. 10.0.0.5) or a hostname" in result.output
        assert "touch" not in result.output.replace("(got '127.0.0.1; touch /tmp/pwned')", "")


# --- 1. every value that is accepted is quoted at one seam ----------------------------------------------
def test_line_quotes_every_word_but_the_home_of_the_token():
    assert plan.line("echo", "a b", "$(x)", "`y`", "'", "-n") == "echo 'a b' '$(x)' '`y`' ''\"'\"'' -n"
    token = plan.token_dir(ClusterConfig.model_construct(name="x y"))
    assert token == "\"$HOME\"/'.raytrain/clusters/x y'"
    assert plan.line("ls", token) == "ls \"$HOME\"/'.raytrain/clusters/x y'"


def test_accepted_metacharacters_arrive_literally(write_yaml, tmp_path):
    """Values that are legal but full of shell syntax (an env value, paths with spaces and `$(...)`): the
    command lines, run by bash, hand them over literally and run nothing else."""
    canary = tmp_path / "canary"
    store = tmp_path / f"st ore$(touch {canary})"
    store.mkdir(parents=True)
    value = f"$(touch {canary}); `touch {canary}` ' \" \n| touch {canary}"
    cfg = load_cluster(write_yaml(
        f"name: x\nhead: {{host: localhost}}\nenv: {{NOTE: {yaml.safe_dump(value, default_style=chr(34)).strip()}}}\n"
        f"python: {yaml.safe_dump(sys.executable + ' $(touch ' + str(canary) + ')', default_style=chr(34)).strip()}\n"
        f"storage: {{path: {yaml.safe_dump(str(store), default_style=chr(34)).strip()}}}\n",
        "c.yaml",
    ))
    assert cfg.env["NOTE"] == value
    printed = subprocess.run(["bash", "-c", plan.line(*plan.env_words(cfg), "printenv", "NOTE")], capture_output=True, text=True)
    assert printed.stdout == value + "\n"
    home = tmp_path / "home"
    home.mkdir()
    token_path = subprocess.run(["bash", "-c", plan.line(*plan.env_words(cfg), "printenv", "RAY_AUTH_TOKEN_PATH")],
                                capture_output=True, text=True, env={**os.environ, "HOME": str(home)})
    assert token_path.stdout == f"{home}/.raytrain/clusters/x/auth_token\n"
    missing = subprocess.run(["bash", "-c", plan.probe(cfg)], capture_output=True, text=True)
    assert missing.returncode == 127 and f"{sys.executable} $(touch {canary})" in missing.stderr
    marker = plan.Marker(str(store), "t0k")
    for command in (plan.write_marker(marker), plan.read_marker(marker), plan.remove_marker(marker)):
        assert subprocess.run(["bash", "-c", command], capture_output=True, text=True).returncode == 0, command
    assert not canary.exists()


def test_the_issues_venv_runs_nothing_on_cluster_check(write_yaml, tmp_path):
    """The issue's report: `venv: "/x; touch /tmp/pwned; #"` with a localhost head made `cluster check` run touch."""
    canary = tmp_path / "pwned"
    path = write_yaml(f"name: x\nhead: {{host: localhost}}\nvenv: '/x; touch {canary}; #'\n", "c.yaml")
    result = CliRunner().invoke(app, ["cluster", "check", str(path)])
    assert result.exit_code == 1 and "cannot run Python on" in result.output
    assert f"'/x; touch {canary}; #/bin/python' -c" in result.output  # the command as run: one quoted word
    assert not canary.exists()
    up = CliRunner().invoke(app, ["cluster", "up", str(path), "--dry-run"])
    assert up.exit_code == 0 and f"'/x; touch {canary}; #/bin/ray' start --head" in up.output
    assert not canary.exists()


def test_ssh_gets_a_double_dash_before_the_destination(tmp_path):
    """Even a destination the schema would refuse (built in code, skipping it) is never read as an option."""
    canary = tmp_path / "canary"
    hostile = NodeConfig.model_construct(host=f"-oProxyCommand=touch {canary}", name=None, address=None)
    ssh = SSHConfig(connect_timeout=2)
    argv = ssh_argv(hostile, ssh)
    assert argv[-2:] == ["--", f"-oProxyCommand=touch {canary}"]
    ran = subprocess.run([*argv, "true"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert ran.returncode == 255 and not canary.exists()
    user = SSHConfig.model_construct(user=f"-oProxyCommand=touch {canary}", port=None, identity_file=None,
                                     connect_timeout=2, host_key_checking="yes", config_file=None)
    ran = subprocess.run([*ssh_argv(NodeConfig(host="localhost.invalid"), user), "true"], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    assert ran.returncode == 255 and not canary.exists()
    # OpenSSH reads what follows `--` as the destination, then the command (`ssh -G` resolves without connecting).
    shown = subprocess.run(["ssh", "-G", "-o", "BatchMode=yes", "--", "lab@m8", "uptime"], capture_output=True, text=True)
    assert shown.returncode == 0 and "user lab\n" in shown.stdout and "hostname m8\n" in shown.stdout
    node = NodeConfig(host="m8")
    assert SSHRunner(SSHConfig(user="lab")).display(node, "echo 'a b'") == (
        "ssh -o BatchMode=yes -o ConnectTimeout=10 -o StrictHostKeyChecking=yes -- lab@m8 'echo '\"'\"'a b'\"'\"''"
    )


def test_the_dashboard_tunnel_gets_a_double_dash_before_the_destination(tmp_path):
    """The tunnel `tune --submit` opens goes through the runner's ssh argv: a hostile destination is no option."""
    canary = tmp_path / "canary"
    hostile = NodeConfig.model_construct(host=f"-oProxyCommand=touch {canary}", name=None, address=None)
    runner = SSHRunner(SSHConfig(connect_timeout=2))
    argv = runner.forward_argv(hostile, 18265, "127.0.0.1", 8265)
    assert argv[:4] == ["ssh", "-N", "-L", "18265:127.0.0.1:8265"] and argv[-2:] == ["--", hostile.host]
    tunnel = runner.tunnel(hostile, "127.0.0.1", 8265, what="the dashboard", timeout_s=30)
    with pytest.raises(ClusterError) as info, tunnel:
        pass
    assert str(info.value).startswith("the SSH tunnel to the dashboard exited (255): ")
    assert not canary.exists()


# --- 3. the dashboard's exposure, by meaning -------------------------------------------------------------
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "::0", "0:0:0:0:0:0:0:0", "192.168.1.10", "::ffff:0.0.0.0", "fe80::1"])
def test_open_dashboard_without_auth_is_refused_by_up_and_check(write_yaml, host):
    path = write_yaml(f"name: x\nhead: {{host: localhost, dashboard: {{host: '{host}'}}}}\nauth: {{mode: disabled}}\n", "c.yaml")
    for args in (["cluster", "up", str(path), "--dry-run"], ["cluster", "check", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"{path}:2: head.dashboard.host: refusing a dashboard open to the network ({host} is not a loopback address)" in result.output
        assert "CVE-2023-48022" in result.output and "--insecure" in result.output
    assert CliRunner().invoke(app, ["cluster", "up", str(path), "--dry-run", "--insecure"]).exit_code == 0
    assert load_cluster(path).head.dashboard.host == host  # down/status/exec still load it


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1"])
def test_loopback_dashboard_without_auth_is_allowed(write_yaml, host):
    path = write_yaml(f"name: x\nhead: {{host: localhost, dashboard: {{host: '{host}'}}}}\nauth: {{mode: disabled}}\n", "c.yaml")
    result = CliRunner().invoke(app, ["cluster", "up", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "plain HTTP" not in result.output


def test_token_dashboard_on_the_network_warns_about_plain_http(write_yaml):
    path = write_yaml("name: x\nhead: {host: localhost, dashboard: {host: 0.0.0.0}}\n", "c.yaml")
    result = CliRunner().invoke(app, ["cluster", "up", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "warning: head.dashboard.host 0.0.0.0 listens beyond the head's loopback" in result.output
    assert "plain HTTP" in result.output and "`raytrain cluster dashboard FILE`" in result.output
    quiet = CliRunner().invoke(app, ["cluster", "up", str(write_yaml("name: x\nhead: {host: localhost}\n", "d.yaml")), "--dry-run"])
    assert quiet.exit_code == 0 and "plain HTTP" not in quiet.output


def test_dashboard_urls_and_tunnel_by_meaning(write_yaml):
    cfg = load_cluster(write_yaml("name: x\nhead: {host: m10, address: 10.0.0.10, dashboard: {host: '::'}}\n", "c.yaml"))
    st = lifecycle.status(cfg, DryRunner(cfg.ssh), known=[], versions=[{}])
    assert st.dashboard_url == "http://10.0.0.10:8265"
    assert cfg.head.dashboard.tunnel_target == "127.0.0.1"
    v6 = load_cluster(write_yaml("name: x\nhead: {host: m10, dashboard: {host: '::1'}}\n", "d.yaml"))
    assert v6.head.dashboard.tunnel_target == "[::1]" and v6.head.dashboard.url_host("m10") == "[::1]"


# --- 4. NFS exports name single hosts -------------------------------------------------------------------
NFS = "name: lab\nhead: {host: m10, address: 10.0.0.10}\nworkers: [{host: m8, address: 10.0.0.8}]\n"


@pytest.mark.parametrize("export", ["/nfsroot *(rw,no_root_squash)", "/nfsroot\n/ *(rw)", "nfsroot", "/a b", "/a\tb", '"/a"'])
def test_nfs_exports_refuses_an_export_that_is_not_one_path(write_yaml, export):
    result = CliRunner().invoke(app, ["nfs", "exports", str(write_yaml(NFS, "c.yaml")), "--export", export])
    assert result.exit_code == 2, result.output
    assert "--export must be an absolute path of letters, digits and `._/-` (no spaces)" in result.output
    assert "(rw" not in result.stdout


@pytest.mark.parametrize("export", ["/", "/etc", "/home", "/usr/local", "/nfsroot/../etc"])
def test_nfs_exports_refuses_a_system_folder(write_yaml, export):
    """`--export /` with rw,no_root_squash made every node root in the server's whole file system, without a word."""
    result = CliRunner().invoke(app, ["nfs", "exports", str(write_yaml(NFS, "c.yaml")), "--export", export])
    assert result.exit_code == 2 and "(rw" not in result.stdout, result.output
    said = " ".join(result.output.split())
    assert (f"--export {export}: " in said and ("is a folder of the server's own system" in said
                                                 or "is not written plainly" in said)), said
    refused_too = refused(write_yaml, NFS + f"storage: {{path: /n/x, nfs: {{server: nas, export: '{export}', "
                                            "mount_point: /n}}\n")
    assert "storage.nfs.export: " in refused_too


@pytest.mark.parametrize("address", ["0.0.0.0/0", "10.0.0.0/8", "@lab", "*", "m?", "m[89]", "10.0.0.9\n/ *(rw)", "10.0.0.9 *"])
def test_nfs_exports_refuses_clients_that_are_not_one_machine(write_yaml, address):
    text = NFS + f"  - {{host: m9, address: {yaml.safe_dump(address, default_style=chr(34)).strip()}}}\n"
    path = write_yaml(text.replace("workers: [{host: m8, address: 10.0.0.8}]\n", "workers:\n  - {host: m8, address: 10.0.0.8}\n"), "c.yaml")
    result = CliRunner().invoke(app, ["nfs", "exports", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:5: workers.1.address: must be an IP address" in result.output
    assert result.stdout == ""


@pytest.mark.parametrize("client", ["*", "10.0.0.0/8", "0.0.0.0/0", "@lab", "m*", "a b", "m8\n/ *(rw)", "m8(rw)", "[m8]"])
def test_server_script_refuses_clients_that_are_not_one_machine(tmp_path, client):
    exports = tmp_path / "exports"
    env = {**os.environ, "EXPORTS_FILE": str(exports)}
    run = subprocess.run(["bash", str(ROOT / "nfs" / "server.sh"), "--dry-run", "--export", str(tmp_path / "n"), "10.0.0.8", client],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 2 and "refusing client" in run.stderr and "give each node's own IP address or hostname" in run.stderr
    assert run.stdout == "" and not exports.exists()


@pytest.mark.parametrize("client", ["10.0.0.8", "m8", "m8.lab.example", "fe80::1", "2001:db8::8"])
def test_server_script_accepts_single_hosts(tmp_path, client):
    run = subprocess.run(["bash", str(ROOT / "nfs" / "server.sh"), "--dry-run", "--export", "/nfsroot", client],
                         capture_output=True, text=True, env={**os.environ, "EXPORTS_FILE": str(tmp_path / "exports")})
    assert run.returncode == 0, run.stderr
    assert f"exports: /nfsroot {client}(rw,sync,no_subtree_check,no_root_squash)\n" in run.stdout


# --- 12. ports, addresses, names ----------------------------------------------------------------------
PORT_FIELDS = ["node_manager_port", "object_manager_port", "min_worker_port", "max_worker_port", "dashboard_agent_listen_port",
               "dashboard_agent_grpc_port", "metrics_export_port", "runtime_env_agent_port", "ray_client_server_port"]


@pytest.mark.parametrize("field", PORT_FIELDS)
@pytest.mark.parametrize("port", [0, 65536, -1])
def test_ports_out_of_range(write_yaml, field, port):
    message = refused(write_yaml, f"name: x\nhead: {{host: m10}}\nports: {{{field}: {port}}}\n")
    assert f"c.yaml:3: ports.{field}: Input should be" in message


@pytest.mark.parametrize(
    "text,expected",
    [
        ("head: {host: m10, port: 6380}\nports: {node_manager_port: 6380}",
         "c.yaml:3: ports.node_manager_port: ports.node_manager_port 6380 is also head.port on m10: every port of a node must differ"),
        ("head: {host: m10, dashboard: {port: 6379}}",
         "c.yaml:2: head.dashboard.port: head.dashboard.port 6379 is also head.port on m10"),
        ("head: {host: m10}\nports: {object_manager_port: 7000, metrics_export_port: 7000}",
         "ports.metrics_export_port: ports.metrics_export_port 7000 is also ports.object_manager_port on m10"),
        ("head: {host: m10}\nports: {min_worker_port: 8000, max_worker_port: 9000}",
         "head.dashboard.port: 8265 is inside the worker port range 8000-9000 on m10"),
        ("head: {host: m10, port: 12000}",
         "head.port: 12000 is inside the worker port range 10002-19999 (Ray's default) on m10"),
        # Ray's own rules, which `ray start` enforced with a traceback once `up` ran (exit 1, a folder written)
        ("head: {host: m10, port: 10001}", "c.yaml:2: head.port: head.port 10001 is also Ray's default port of "
         "ports.ray_client_server_port, which is not pinned on m10: every port of a node must differ"),
        ("head: {host: m10}\nworkers: [{host: m8, address: 10.0.0.8}]\nports: {node_manager_port: 52365}",
         "ports.node_manager_port: ports.node_manager_port 52365 is also Ray's default port of "
         "ports.dashboard_agent_listen_port, which is not pinned on m10"),
        ("head: {host: m10}\nports: {min_worker_port: 10000, max_worker_port: 11000}",
         "c.yaml:3: ports.max_worker_port: the worker port range 10000-11000 holds 10001, Ray's default port of "
         "ports.ray_client_server_port on m10: move the range, or pin ports.ray_client_server_port outside it"),
        ("head: {host: m10}\nports: {min_worker_port: 100, max_worker_port: 2000}",
         "ports.min_worker_port: Ray takes min_worker_port from 1024 to 65535 (its `ray start` refuses a lower one)"),
        ("head: {host: m10}\nports: {ray_client_server_port: 80}", "ports.ray_client_server_port: Ray takes"),
        ("head: {host: m10}\nports: {min_worker_port: 20000, max_worker_port: 20000}",
         "ports: the worker port range is empty: min_worker_port 20000 = max_worker_port 20000 (Ray takes a "
         "max_worker_port higher than min_worker_port)"),
        ("head: {host: m10}\nports: {min_worker_port: 20000, max_worker_port: 10002}",
         "c.yaml:3: ports: the worker port range is empty: min_worker_port 20000 > max_worker_port 10002"),
        ("head: {host: m10}\nports: {min_worker_port: 30000}",
         "ports: the worker port range is empty: min_worker_port 30000 > max_worker_port 19999"),
        ("head: {host: m10, address: 10.0.0.1}\nworkers: [{host: m8, address: 10.0.0.1}]",
         "c.yaml:3: workers.0.address: m8 has the same address as m10 (10.0.0.1): every node needs its own"),
        ("head: {host: m10, address: '::1'}\nworkers: [{host: m8, address: '0:0:0:0:0:0:0:1'}]",
         "workers.0.address: m8 has the same address as m10 (0:0:0:0:0:0:0:1)"),
        ("head: {host: M8}\nworkers: [{host: m8, name: other}]",
         "workers.0.host: other has the same address as M8 (m8)"),
    ],
)
def test_ports_and_addresses_collide(write_yaml, text, expected):
    assert expected in refused(write_yaml, f"name: x\n{text}\n")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("head: {host: m10, address: 127.0.0.1}\nworkers: [{host: m8, address: 10.0.0.8}]",
         "c.yaml:2: head.address: 127.0.0.1 is a loopback address (each machine has it for itself), not one at which "
         "other machines reach m10: give m10's address on the network the nodes share (e.g. 192.168.1.10)"),
        ("head: {host: m10, address: 10.0.0.1}\nworkers: [{host: m8, address: '::1'}]",
         "c.yaml:3: workers.0.address: ::1 is a loopback address"),
        ("head: {host: 0.0.0.0}", "c.yaml:2: head.host: 0.0.0.0 is the unspecified address (to a listening socket it "
         "means every interface), not one at which other machines reach the node: give the node's address"),
        ("head: {host: m10, address: '::'}", "head.address: :: is the unspecified address"),
        ("head: {host: m10, address: 224.0.0.1}", "head.address: 224.0.0.1 is a multicast address"),
        ("head: {host: m10, address: 'ff02::1'}", "head.address: ff02::1 is a multicast address"),
        ("head: {host: m10, address: 255.255.255.255}", "head.address: 255.255.255.255 is the broadcast address"),
        ("head: {host: m10, address: 240.0.0.9}", "head.address: 240.0.0.9 is a reserved address"),
    ],
)
def test_a_node_address_other_machines_cannot_reach_it_at_is_refused(write_yaml, text, expected):
    """`ray start --node-ip-address` took these, and the cluster failed midway through `up` (a worker's
    `ray start --address 127.0.0.1:6379` looks for the head on the worker itself)."""
    assert expected in refused(write_yaml, f"name: x\n{text}\n")


ZONE = ("has a zone (%eth0): that names an interface of one machine, which the other nodes do not have; give the "
        "node's global or unique-local address")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("head: {host: m10, address: 'fe80::1%eth0'}", f"c.yaml:2: head.address: 'fe80::1%eth0' {ZONE}"),
        ("head: {host: 'fe80::10%eth0'}", f"c.yaml:2: head.host: 'fe80::10%eth0' {ZONE}"),
        ("head: {host: m10, dashboard: {host: 'fe80::1%eth0'}}", f"c.yaml:2: head.dashboard.host: 'fe80::1%eth0' {ZONE}"),
        ("head: {host: m10, address: 10.0.0.1}\nstorage: {path: /nfsroot, nfs: {server: '[fe80::1%eth0]'}}",
         f"c.yaml:3: storage.nfs.server: 'fe80::1%eth0' {ZONE}"),
        ("head: {host: m10, address: m10.lab.example.}",
         "c.yaml:2: head.address: ends with `.`: write the name without it, m10.lab.example"),
        ("head: {host: m10, address: 10.0.0.1}\nstorage: {path: /nfsroot, nfs: {server: nas.lab.example.}}",
         "c.yaml:3: storage.nfs.server: ends with `.`: write the name without it, nas.lab.example"),
    ],
)
def test_an_address_with_a_zone_or_a_final_dot_is_refused_saying_why(write_yaml, text, expected):
    """A zone (`%eth0`) was accepted: it names an interface of this machine, meaningless on the other nodes, and
    reached `ray start --node-ip-address`. A DNS name in its absolute form (`m10.lab.example.`) was refused as not a
    hostname, though every character of it is one a hostname has."""
    assert expected in " ".join(refused(write_yaml, f"name: x\n{text}\n").split())


@given(st.ip_addresses())
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_node_address_is_judged_by_meaning(write_yaml, address):
    """Every IP a worker may be given: refused exactly where no other machine could reach it there."""
    text = f"name: x\nhead: {{host: m10, address: '10.9.9.9'}}\nworkers: [{{host: m8, address: '{address}'}}]\n"
    unreachable = (address.is_unspecified or address.is_multicast or address.is_loopback
                   or (address.version == 4 and address.is_reserved))
    if unreachable:
        assert f"c.yaml:3: workers.0.address: {address} is " in refused(write_yaml, text)
    elif str(address) != "10.9.9.9":
        assert load_cluster(write_yaml(text, "c.yaml")).workers[0].ip == str(address)


def test_a_cluster_on_loopback_alone_is_one_machine_and_loads(write_yaml):
    cfg = load_cluster(write_yaml("name: x\nhead: {host: m10, address: 127.0.0.1}\n"
                                  "workers: [{host: m8, address: 127.0.0.2}]\n", "c.yaml"))
    assert cfg.problems() == []


def test_distinct_ports_pass(write_yaml):
    cfg = load_cluster(ROOT / "configs" / "cluster_lab.yaml")
    assert len(set(cfg.node_ports(cfg.head).values())) == len(cfg.node_ports(cfg.head)) == 8
    assert cfg.problems() == []


# --- 12. the token's folders and file -------------------------------------------------------------------
def _modes(home: Path, name: str) -> list[str]:
    folders = [home / ".raytrain", home / ".raytrain" / "clusters", home / ".raytrain" / "clusters" / name]
    return [oct(stat.S_IMODE(p.stat().st_mode)) for p in [*folders, folders[-1] / "auth_token"]]


def test_token_folders_are_0700_whatever_the_umask(write_yaml, tmp_path, monkeypatch):
    cfg = load_cluster(write_yaml("name: lab\nhead: {host: localhost}\n", "c.yaml"))
    home = tmp_path / "here"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    old = os.umask(0)
    try:
        token = lifecycle.ensure_token(cfg)
        # The command every node runs, here under umask 0 as well, with a home of its own.
        node = tmp_path / "node"
        node.mkdir()
        ran = subprocess.run(["bash", "-c", plan.install_token(cfg)], input="s3cret\n", capture_output=True, text=True,
                             env={**os.environ, "HOME": str(node)})
    finally:
        os.umask(old)
    assert len(token) == 64
    assert _modes(home, "lab") == ["0o700", "0o700", "0o700", "0o600"]
    assert ran.returncode == 0, ran.stderr
    assert _modes(node, "lab") == ["0o700", "0o700", "0o700", "0o600"]
    assert (node / ".raytrain/clusters/lab/auth_token").read_text() == "s3cret\n"
    assert "s3cret" not in plan.install_token(cfg)


def test_install_token_tightens_an_existing_folder(write_yaml, tmp_path):
    cfg = load_cluster(write_yaml("name: lab\nhead: {host: localhost}\n", "c.yaml"))
    folder = tmp_path / ".raytrain" / "clusters" / "lab"
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    (folder / "auth_token").write_text("old")
    (folder / "auth_token").chmod(0o644)
    ran = subprocess.run(["bash", "-c", plan.install_token(cfg)], input="new\n", capture_output=True, text=True,
                         env={**os.environ, "HOME": str(tmp_path)})
    assert ran.returncode == 0, ran.stderr
    assert oct(stat.S_IMODE(folder.stat().st_mode)) == "0o700"
    assert oct(stat.S_IMODE((folder / "auth_token").stat().st_mode)) == "0o600"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o620])
def test_a_token_others_can_read_is_refused_with_the_chmod_to_run(write_yaml, tmp_path, monkeypatch, mode):
    cfg = load_cluster(write_yaml("name: lab\nhead: {host: localhost}\n", "c.yaml"))
    monkeypatch.setenv("HOME", str(tmp_path))
    path = lifecycle.local_token_path(cfg)
    path.parent.mkdir(parents=True)
    path.write_text("a" * 64)
    path.chmod(mode)
    for call in (lifecycle.ensure_token, lifecycle.read_token, lifecycle.driver_env):
        with pytest.raises(ConfigError) as info:
            call(cfg)
        assert info.value.exit_code == 2
        assert f"readable by group or others (mode {mode:04o})" in str(info.value)
        assert f"Run `chmod 600 {path}`" in str(info.value)
    assert path.read_text() == "a" * 64  # left as it was
    path.chmod(0o600)
    assert lifecycle.read_token(cfg) == "a" * 64


# --- 2. property: every string field full of shell and ssh syntax -------------------------------------
def _base(store: Path, gcs: int, dash: int) -> dict:
    return {
        "name": "hyp",
        "head": {"host": "localhost", "address": "127.0.0.1", "name": "head", "port": gcs,
                 "labels": {"rack": "a"}, "resources": {"h": 1}, "dashboard": {"host": "127.0.0.1", "port": dash}},
        "workers": [{"host": "w1", "address": "10.9.9.9", "name": "w1"}],
        "ssh": {"user": "lab", "identity_file": "/nonexistent/id", "config_file": "/nonexistent/ssh_config", "connect_timeout": 2},
        "python": sys.executable,
        "env": {"NOTE": "1"},
        "storage": {"path": str(store), "nfs": {"server": "10.9.9.8", "export": "/nfsroot", "mount_point": str(store),
                                                "options": "nolock", "export_options": "rw"}},
    }


# Where each string lives: (path in the file, how a hostile value is made from the payload).
def _set(data: dict, path: tuple, value) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def _rename_key(data: dict, path: tuple, new_key: str) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    node[new_key] = node.pop(path[-1])


STRING_FIELDS = [
    ("name",), ("head", "host"), ("head", "address"), ("head", "name"), ("head", "dashboard", "host"),
    ("head", "labels", "rack"), ("workers", 0, "host"), ("workers", 0, "address"), ("workers", 0, "name"),
    ("ssh", "user"), ("ssh", "identity_file"), ("ssh", "config_file"), ("python",), ("env", "NOTE"),
    ("storage", "path"), ("storage", "nfs", "server"), ("storage", "nfs", "export"), ("storage", "nfs", "options"),
    ("storage", "nfs", "export_options"), ("storage", "nfs", "mount_point"),
]
# Fields where shell syntax is legal (a value, a path below an absolute one).
FREE_FIELDS = [("env", "NOTE"), ("python",), ("storage", "path"), ("ssh", "identity_file"), ("ssh", "config_file")]
KEY_FIELDS = [("head", "labels", "rack"), ("head", "resources", "h"), ("env", "NOTE")]
PAYLOADS = ["; touch {c}", "$(touch {c})", "`touch {c}`", "' ; touch {c} ; '", "\" ; touch {c} ; \"", "\ntouch {c}\n",
            "-oProxyCommand=touch {c}", " && touch {c}", "| touch {c}", "\\; touch {c}", "$'\\n'touch {c}", " -- touch {c}"]
METACHARACTERS = ";$()`'\"\n -|&<>*?[]{}~#\\\t/@,=:"

STUBS = {  # programs the printed commands call, recording their arguments instead of acting
    name: '#!/bin/sh\nprintf "%s\\0" "$#" "$(basename "$0")" "$@" >> "$STUB_LOG"\n'
    for name in ("ssh", "env", "sudo", "mkdir", "mount", "findmnt", "cat", "rm", "chmod")
}


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    stubs = root / "stubs"
    stubs.mkdir()
    for name, body in STUBS.items():
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    return root


def _run_recorded(command: str, root: Path, depth: int = 0) -> list[list[str]]:
    """Run a printed command with bash, every program it calls replaced by a recorder; follow ssh's remote command."""
    log = root / f"log{depth}"
    log.unlink(missing_ok=True)
    env = {"PATH": f"{root / 'stubs'}:/usr/bin:/bin", "HOME": str(root / "home"), "STUB_LOG": str(log)}
    ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=30)
    assert "syntax error" not in ran.stderr and "unexpected EOF" not in ran.stderr, (command, ran.stderr)
    words = log.read_text().split("\0")[:-1] if log.exists() else []
    calls = []
    while words:  # each call: its argument count, its name, its arguments
        count = int(words[0])
        calls.append(words[1 : count + 2])
        words = words[count + 2 :]
    for call in [c for c in calls if c and c[0] == "ssh"]:
        assert call[-3] == "--"  # destination after `--`, then exactly one word: the remote command
        calls += _run_recorded(call[-1], root, depth + 1)
    return calls


HOSTILE = st.tuples(st.sampled_from(PAYLOADS), st.sampled_from(["append", "prepend", "alone"]), st.text(METACHARACTERS, max_size=4))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    # Any field, any form: mostly refused. Half of the examples leave them alone and get past the schema.
    strings=st.one_of(st.just({}), st.dictionaries(st.sampled_from(STRING_FIELDS), HOSTILE, min_size=1, max_size=2)),
    # Fields where shell syntax is legal, in a legal form (below the absolute path they had): quoting is tested.
    free=st.dictionaries(st.sampled_from(FREE_FIELDS), HOSTILE.map(lambda h: (h[0], "append", h[2])), min_size=1, max_size=4),
    always=st.tuples(st.sampled_from(PAYLOADS), st.text(METACHARACTERS, max_size=4)),
    keys=st.one_of(st.just({}), st.just({}), st.dictionaries(st.sampled_from(KEY_FIELDS), st.sampled_from(PAYLOADS), min_size=1, max_size=1)),
)
def test_hostile_values_are_refused_or_quoted(fuzz_dir, strings, free, always, keys):
    """Every string field (and key) of a cluster file filled with shell and ssh syntax: `check`, `up --dry-run`,
    `down --dry-run`, `exec --dry-run`, `status` and `nfs exports` against a localhost head either refuse it
    (exit 2 naming the file) or quote it; the canary file never appears, and the printed commands, run by bash
    with recorders for every program, hand accepted env values and paths over literally."""
    canary = fuzz_dir / "CANARY"
    store = fuzz_dir / "store"
    store.mkdir(exist_ok=True)
    (fuzz_dir / "home").mkdir(exist_ok=True)
    data = _base(store, free_port(), free_port())
    data["env"]["EXTRA"] = always[0].format(c=canary) + always[1]  # legal in every example: quoting is always tested
    for path, (payload, how, noise) in {**free, **strings}.items():
        hostile = payload.format(c=canary) + noise
        node = data
        for part in path:
            node = node[part]
        base = str(node)
        value = {"append": f"{base}/{hostile}" if base.startswith("/") else base + hostile,
                 "prepend": hostile + base, "alone": hostile}[how]
        _set(data, path, value)
    for path, payload in keys.items():
        _rename_key(data, path, payload.format(c=canary))
    full = fuzz_dir / "cluster.yaml"
    full.write_text(yaml.safe_dump(data))
    local = fuzz_dir / "local.yaml"
    local.write_text(yaml.safe_dump({**data, "workers": []}))
    env = {"HOME": str(fuzz_dir / "home")}
    commands = {
        "check": (["cluster", "check", str(local)], {0, 1}),
        "status": (["cluster", "status", str(local), "--json"], {1}),  # no cluster runs: not up
        "up": (["cluster", "up", str(full), "--dry-run"], {0}),
        "down": (["cluster", "down", str(full), "--dry-run"], {0}),
        "exec": (["cluster", "exec", str(full), "--dry-run", "--", "uptime"], {0}),
        "exports": (["nfs", "exports", str(full)], {0}),
    }
    try:
        cfg = load_cluster(full)
    except ConfigError as exc:
        cfg, refusal = None, str(exc)
    for name, (args, ok_codes) in commands.items():
        file = args[2]
        result = CliRunner().invoke(app, args, env=env)
        assert result.exception is None or isinstance(result.exception, SystemExit), (name, result.exception)
        if cfg is None and file == str(full):
            assert result.exit_code == 2, (name, result.output)
            assert f"error: {file}:" in result.output, (name, result.output)
        elif result.exit_code != 2:
            assert result.exit_code in ok_codes, (name, result.output)
        if name == "exports" and result.exit_code == 0:
            line = result.stdout.rstrip("\n")
            assert "\n" not in line and "*" not in line and "@" not in line and "/" not in line.split(" ", 1)[1]
        assert not canary.exists(), (name, data)
    event("refused" if cfg is None else "accepted")
    if cfg is None:
        assert refusal.startswith(f"{full}:") or f"\n{full}:" in refusal
        return
    # Accepted: run what the dry runs print, with recorders, and look at what the programs received.
    runner = DryRunner(cfg.ssh)
    lifecycle.up(cfg, runner)
    lifecycle.down(cfg, runner)
    lifecycle.exec_(cfg, runner, "uptime", cfg.nodes)
    calls = []
    for _node, shown in runner.commands:
        calls += _run_recorded(shown.removesuffix("  < (stdin: secret, not shown)"), fuzz_dir)
        assert not canary.exists(), shown
    env_calls = [c for c in calls if c[0] == "env"]
    assert env_calls and all(f"{k}={v}" in c for c in env_calls for k, v in cfg.env.items())
    assert all(f"--node-ip-address={cfg.head.ip}" in c for c in env_calls if "--head" in c)
    mkdirs = [c for c in calls if c[0] == "mkdir"]
    assert ["mkdir", "-p", cfg.storage.path] in mkdirs and ["mkdir", "-p", cfg.storage.mount_point] in mkdirs
    assert ["findmnt", "-n", "-o", "SOURCE,FSTYPE", "--mountpoint", cfg.storage.mount_point] in calls


@pytest.mark.parametrize("head, address", [
    ("{host: m10, address: '2001:db8::10', port: 6333}", "[2001:db8::10]:6333"),
    ("{host: '2001:db8::10'}", "[2001:db8::10]:6379"),
    ("{host: m10, address: 192.168.1.10}", "192.168.1.10:6379"),
    ("{host: m10}", "m10:6379"),
])
def test_the_cluster_address_is_in_the_form_ray_reads(write_yaml, head, address):
    """`2001:db8::10:6333` was given to `ray start --address` and as RAY_ADDRESS: Ray finds no port in it, and a
    worker's `ray start` failed midway through `up`. An IPv6 head is written in brackets, as Ray writes it."""
    from ray._common.network_utils import parse_address

    cfg = load_cluster(write_yaml(f"name: x\nhead: {head}\nworkers: [{{host: m8, address: '2001:db8::8'}}]\n", "c.yaml"))
    assert cfg.address == address
    assert parse_address(cfg.address) == (cfg.head.ip, str(cfg.head.port))
    assert f"--address={address}" in plan.start_worker(cfg, cfg.workers[0])


# --- status says by its exit code whether the cluster is up ---------------------------------------------
def test_status_exits_1_when_the_head_does_not_answer(write_yaml, tmp_path):
    """A script waiting for the cluster (`until raytrain cluster status c.yaml; do sleep 5; done`) needs the exit
    code: status of a cluster that is down printed its table and exited 0."""
    path = write_yaml(f"name: x\nhead: {{host: localhost, port: {free_port()}}}\n", "c.yaml")
    for args in (["cluster", "status", str(path)], ["cluster", "status", str(path), "--json"]):
        result = CliRunner().invoke(app, args, env={"HOME": str(tmp_path)})
        assert result.exit_code == 1, result.output
        assert ("cluster x is not up: its head localhost does not answer (down or unreachable): `raytrain cluster "
                f"up {path}` starts it") in " ".join(result.stderr.split())
    assert json.loads(result.stdout)["head_reachable"] is False


def test_status_exits_1_unless_every_node_of_the_file_is_alive(write_yaml):
    cfg = load_cluster(write_yaml("name: x\nhead: {host: m10, address: 10.0.0.10}\n"
                                  "workers: [{host: m8, address: 10.0.0.8}, {host: m9, address: 10.0.0.9}]\n", "c.yaml"))

    def node(ip, alive):
        return {"ip": ip, "alive": alive, "resources": {"CPU": 1.0}, "hostname": ip}

    up = [node("10.0.0.10", True), node("10.0.0.8", True), node("10.0.0.9", True)]
    assert lifecycle.not_up(cfg, lifecycle.status(cfg, DryRunner(cfg.ssh), known=up, versions=[{}] * 3), "c.yaml") is None
    partly = [node("10.0.0.10", True), node("10.0.0.8", False)]
    st = lifecycle.status(cfg, DryRunner(cfg.ssh), known=partly, versions=[{}] * 3)
    assert lifecycle.not_up(cfg, st, "c.yaml") == ("cluster x is not up: 1 of its 3 nodes alive (m8 dead, m9 not joined): "
                                                   "`raytrain cluster up c.yaml` starts the missing ones")


@pytest.mark.parametrize("family, host", [(socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")])
def test_the_node_listing_reaches_a_head_at_an_ipv6_address(tmp_path, family, host):
    """`[2001:db8::10]:6379` was split into the host `[2001:db8::10]`, which no connection resolves: status said the
    head was down and `up` waited until it timed out. Here Ray itself is a stub (its GcsClient import fails, so the
    script asks the stub's ray.nodes())."""
    from raytrain.cluster.plan import NODES_SCRIPT

    stub = tmp_path / "stub" / "ray"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("def init(**kwargs): pass\n"
                                      "def nodes(): return [{'NodeManagerAddress': 'h', 'Alive': True}]\n")
    with socket.socket(family) as server:
        server.bind((host, 0))
        server.listen()
        port = server.getsockname()[1]
        address = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        ran = subprocess.run([sys.executable, "-c", NODES_SCRIPT], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "RAY_ADDRESS": address, "PYTHONPATH": str(tmp_path / "stub")})
    assert json.loads(ran.stdout) == [{"ip": "h", "alive": True, "resources": {}, "hostname": None}], ran.stderr


def test_an_ipv4_address_written_as_ipv6_is_the_same_address(write_yaml):
    """::ffff:192.168.1.10 is 192.168.1.10: two nodes at it were accepted."""
    text = "name: x\nhead: {host: m10, address: 192.168.1.10}\nworkers: [{host: m8, address: '::ffff:192.168.1.10'}]\n"
    assert "c.yaml:3: workers.0.address: m8 has the same address as m10 (::ffff:192.168.1.10)" in refused(write_yaml, text)
