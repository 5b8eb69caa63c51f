"""The NFS mount step of `raytrain cluster up` and the nfs/ scripts, on a real NFSv3 share.

A head and two workers as namespaced hosts (hostlab.py) and an NFS server on the same bridge (nfslab.py:
nfs-ganesha serving NFSv3; on the hosts `mount -t nfs` runs a FUSE client, as this kernel has no NFS).
The hosts share this machine's root file system, so every check that a file is on the share looks in the
server's export directory, and checks that the same path on this machine (no mount) does not have it.
"""

import sys
from pathlib import Path

import pytest

from .hostlab import ROOT, HostLab, can_create_namespaces, raytrain
from .nfslab import NFSLab, cannot_serve_nfs

pytestmark = [pytest.mark.integration, pytest.mark.multihost]

WHY_NOT = can_create_namespaces() or cannot_serve_nfs()
OPTIONS = "rw,sync,no_subtree_check,no_root_squash"


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    if WHY_NOT:
        pytest.skip(f"cannot create namespaced hosts with an NFS share on this machine: {WHY_NOT}")
    with HostLab(tmp_path_factory.mktemp("nfslab")) as lab, NFSLab(lab) as nfs:
        yield lab, nfs


def cluster_file(lab: HostLab, tmp_path: Path, name: str, storage: str) -> Path:
    ip = lab.ip
    node = "num_cpus: 1, object_store_memory: 134217728"
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        f"head: {{host: {ip['head']}, name: head, port: 6333, {node}, dashboard: {{enabled: false}}}}\n"
        f"workers:\n  - {{host: {ip['w1']}, name: w1, {node}}}\n  - {{host: {ip['w2']}, name: w2, {node}}}\n"
        f"ssh: {{config_file: {lab.ssh_config}, connect_timeout: 5}}\n"
        f"python: {sys.executable}\n"
        f"storage: {storage}\n"
        "start_timeout_s: 60\n"
    )
    return path




def ray_processes(lab: HostLab) -> dict[str, list[str]]:
    return {h: lab.processes(h, "raylet|gcs_server") for h in lab.names}


def test_up_mounts_the_share_on_every_host_before_the_preflight(labs, tmp_path):
    lab, nfs = labs
    mnt = lab.root / "nfsroot"
    path = cluster_file(lab, tmp_path, "nfsup", f"{{path: {mnt}, nfs: {{server: {nfs.ip}, export: /nfsroot}}}}")
    try:
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 0, up.stderr[-3000:]
        for h in lab.names:
            assert f"  {h}: mounted {nfs.share} at {mnt}\n" in up.stderr
            assert mounted_at(nfs, h, mnt) == [(str(mnt), nfs.share, "fuse.nfsfuse")]
        # The mount step comes first: the preflight's shared-storage check ran on the share.
        assert up.stderr.index(f"storage: mounting {nfs.share}") < up.stderr.index("preflight:") < up.stderr.index("starting the head")
        assert "cluster nfsup up in" in up.stderr

        # Written on w1 under storage.path: on the server's export, and read on w2 and the head.
        wrote = raytrain("cluster", "exec", str(path), "--node", "w1", "--", f"echo from-w1 > {mnt}/written_on_w1.txt")
        assert wrote.returncode == 0, wrote.stderr
        assert (nfs.export_dir / "written_on_w1.txt").read_text() == "from-w1\n"
        assert not (mnt / "written_on_w1.txt").exists()  # this machine has no mount: it went over NFS
        read = raytrain("cluster", "exec", str(path), "--node", "w2", "--node", "head", "--", f"cat {mnt}/written_on_w1.txt")
        assert read.returncode == 0, read.stderr
        assert sorted(read.stdout.splitlines()) == ["[head] from-w1", "[w2] from-w1"]

        again = raytrain("cluster", "up", str(path))
        assert again.returncode == 0, again.stderr[-3000:]
        for h in lab.names:
            assert f"  {h}: already mounted {mnt} ({nfs.share} fuse.nfsfuse)\n" in again.stderr
            assert len(mounted_at(nfs, h, mnt)) == 1  # not mounted twice
        assert "already up; nothing changed" in again.stderr
    finally:
        down = raytrain("cluster", "down", str(path), "-y")
        for h in lab.names:  # `down` leaves the share mounted, like an fstab mount: unmount for the next test
            lab.on(h, f"umount {mnt}")
    assert down.returncode == 0, down.stderr[-3000:]
    assert ray_processes(lab) == {h: [] for h in lab.names}


def mounted_at(nfs: NFSLab, h: str, mnt: Path) -> list[tuple[str, str, str]]:
    return [m for m in nfs.mounts(h) if m[0] == str(mnt)]


def test_wrong_server_fails_naming_node_command_exit_code_and_error(labs, tmp_path):
    lab, nfs = labs
    mnt = lab.root / "wrong_server"
    wrong = f"{lab.net}.99"  # on the lab's subnet, but nobody has it
    path = cluster_file(lab, tmp_path, "nfswrong", f"{{path: {mnt}, nfs: {{server: {wrong}, export: /nfsroot}}}}")
    up = raytrain("cluster", "up", str(path))
    assert up.returncode == 1
    err = up.stderr
    assert f"error: could not mount the NFS share {wrong}:/nfsroot at {mnt}, nothing was started:" in err
    for h in lab.names:
        assert (
            f"{h}: `ssh -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes -F {lab.ssh_config} "
            f"-- {lab.ip[h]} 'mkdir -p {mnt} && mount -t nfs -o nolock {wrong}:/nfsroot {mnt}'` exited 32"
        ) in err
        assert mounted_at(nfs, h, mnt) == []
    assert err.count("mount.nfs: No route to host") == 3
    assert "preflight" not in err
    assert ray_processes(lab) == {h: [] for h in lab.names}


def test_a_refused_up_unmounts_what_it_mounted(labs, tmp_path):
    """The mount comes before the preflight; when the preflight then refuses (no such Python on the nodes),
    `up` unmounts the share again everywhere it mounted it, and starts nothing."""
    lab, nfs = labs
    mnt = lab.root / "refused_mount"
    path = cluster_file(lab, tmp_path, "nfsrefused", f"{{path: {mnt}, nfs: {{server: {nfs.ip}, export: /nfsroot}}}}")
    path.write_text(path.read_text().replace(f"python: {sys.executable}", "python: /no/such/python3"))
    try:
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 1, up.stderr[-3000:]
        for h in lab.names:
            assert f"  {h}: mounted {nfs.share} at {mnt}\n" in up.stderr  # it did mount first
            assert mounted_at(nfs, h, mnt) == []
        assert "preflight failed, nothing was started" in up.stderr
        assert "the NFS share was unmounted again on " in up.stderr
        assert ray_processes(lab) == {h: [] for h in lab.names}
    finally:
        for h in lab.names:
            if mounted_at(nfs, h, mnt):
                lab.on(h, f"umount {mnt}")


def test_nfs_exports_prints_the_cluster_hosts(labs, tmp_path):
    lab, nfs = labs
    path = cluster_file(lab, tmp_path, "nfsexports", f"{{path: /nfsroot, nfs: {{server: {nfs.ip}, export: /nfsroot}}}}")
    result = raytrain("nfs", "exports", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "/nfsroot " + " ".join(f"{lab.ip[h]}({OPTIONS})" for h in ("head", "w1", "w2")) + "\n"


def test_client_and_check_scripts(labs, tmp_path):
    """nfs/client.sh mounts the share on w1 and w2 (twice: the second run changes nothing), then
    nfs/check.sh finds the export with showmount and a marker written on w1 on w2 and the server."""
    lab, nfs = labs
    mnt = lab.root / "scripts_mnt"
    fstab = tmp_path / "fstab"
    fstab.write_text("# fstab\nUUID=1234 / ext4 defaults 0 1\n")
    client = f"FSTAB={fstab} bash {ROOT / 'nfs' / 'client.sh'} --mount-point {mnt} {nfs.ip}"
    line = f"{nfs.share} {mnt} nfs nolock,_netdev 0 0\n"
    for h in ("w1", "w2"):
        first = lab.on(h, client)
        assert first.returncode == 0, first.stderr
        assert f"mounted: {nfs.share} at {mnt}" in first.stdout
        assert mounted_at(nfs, h, mnt) == [(str(mnt), nfs.share, "fuse.nfsfuse")]
    assert fstab.read_text() == "# fstab\nUUID=1234 / ext4 defaults 0 1\n" + line
    again = lab.on("w1", client)
    assert again.returncode == 0, again.stderr
    assert f"already mounted: {mnt} ({nfs.share} fuse.nfsfuse)" in again.stdout
    assert fstab.read_text().count(line) == 1 and len(mounted_at(nfs, "w1", mnt)) == 1

    # From the head, as an admin would run it (ganesha lists exports only to clients it serves, the lab's hosts).
    check = (f"SSH='ssh -F {lab.ssh_config} -o BatchMode=yes' {ROOT / 'nfs' / 'check.sh'} --path {mnt} "
             f"--export-dir {nfs.export_dir} {nfs.ip}")
    ok = lab.on("head", f"{check} {lab.ip['w1']} {lab.ip['w2']}")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"/nfsroot {lab.ip['head']}/32,{lab.ip['w1']}/32,{lab.ip['w2']}/32" in ok.stdout  # showmount -e
    assert f"ok: {nfs.ip} exports /nfsroot" in ok.stdout
    assert f"ok: {lab.ip['w2']} reads what {lab.ip['w1']} wrote" in ok.stdout
    assert f"ok: the marker is in the export directory {nfs.export_dir}" in ok.stdout
    assert not list(nfs.export_dir.glob(".raytrain_nfs_check_*"))  # removed at the end
    # The head has no mount at that path: the marker is not there, and check.sh says where.
    bad = lab.on("head", f"{check} {lab.ip['w1']} {lab.ip['head']}")
    assert bad.returncode == 1
    assert f"FAIL: {lab.ip['head']}: cannot read {mnt}/.raytrain_nfs_check_" in bad.stdout
    for h in ("w1", "w2"):
        assert lab.on(h, f"umount {mnt}").returncode == 0
