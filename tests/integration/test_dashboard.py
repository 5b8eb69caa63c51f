"""The Ray dashboard of a lab cluster in a real headless browser (Debian's chromium driven by Selenium).

Two namespaced hosts (head and w1) run a cluster started by `raytrain cluster up` with token auth (the
default) and the dashboard on the head's 127.0.0.1. From this machine: a tiny sweep is submitted with
`raytrain tune ... --submit`, `raytrain cluster dashboard FILE` opens the SSH tunnel, and the browser sees the
login box first, logs in with the token through it, then finds both nodes ALIVE on the Cluster page and the
sweep's job on the Jobs page. Screenshots (login.png, cluster.png, jobs.png, and one per failed wait) go to
$RAYTRAIN_TEST_ARTIFACTS/test_dashboard when that is set, else to a temporary folder; the test prints which.

Ray 2.60 facts this relies on (../shared/dashlab): an unauthenticated page load opens the "Authentication
Token Required" box, its Submit sets the HttpOnly cookie `ray-authentication-token`; the Jobs page shows the
submission id, not a Ray job id, for jobs without a Ray driver of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ..ports import free_port
from .conftest import NO_HOSTS, tiny_base
from .hostlab import HostLab, can_create_namespaces, raytrain

pytestmark = [pytest.mark.integration, pytest.mark.multihost, pytest.mark.timeout(1800)]

WHY_NOT = can_create_namespaces()
NAME = "labdash6"
SWEEP = "dashview"
LOGIN_BOX = "Authentication Token Required"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
PAGE_WAIT_S = 120  # one page rendering its data; generous because other clusters share the CPUs
JOB_WAIT_S = 420  # the tiny sweep, from submission to SUCCEEDED





def cannot_install_browser() -> str | None:
    """Why this machine cannot get a headless browser (no root apt-get while chromium is missing), else None."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()) and (os.geteuid() != 0 or not shutil.which("apt-get")):
        return f"{CHROMIUM} or {CHROMEDRIVER} missing and no root apt-get to install them"
    return None


def install_browser() -> str | None:
    """Install Debian's chromium and chromium-driver and the selenium package when missing; None when ready,
    else why the installation failed (a failure of the test, not a reason to skip it)."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=600", "chromium", "chromium-driver"]
        try:
            done = subprocess.run(install, capture_output=True, text=True, env=env, timeout=1200)
            if done.returncode != 0:  # stale package lists: refresh them once
                subprocess.run(["apt-get", "update", "-qq", "-o", "DPkg::Lock::Timeout=600"], capture_output=True,
                               env=env, timeout=600)
                done = subprocess.run(install, capture_output=True, text=True, env=env, timeout=1200)
        except subprocess.TimeoutExpired:
            return "apt-get install chromium chromium-driver timed out"
        if done.returncode != 0:
            return f"apt-get install chromium chromium-driver failed: {done.stderr.strip()[-500:]}"
    try:
        import selenium  # noqa: F401
    except ImportError:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "selenium>=4.10"], capture_output=True,
                             text=True, timeout=600)
        if pip.returncode != 0:
            return f"pip install selenium failed: {pip.stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    where = os.environ.get("RAYTRAIN_TEST_ARTIFACTS")
    folder = Path(where) / "test_dashboard" if where else tmp_path_factory.mktemp("dashboard-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if WHY_NOT:
        pytest.skip(f"{NO_HOSTS}: {WHY_NOT}")
    why = cannot_install_browser()  # before the lab, so a machine that cannot have a browser skips at once
    if why:
        pytest.skip(f"no headless browser can be installed here: {why}")
    failed = install_browser()
    if failed:
        pytest.fail(f"could not install the headless browser: {failed}")
    with HostLab(tmp_path_factory.mktemp("dashlab"), names=("head", "w1")) as lab:
        yield lab


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    """One CPU per host; the dashboard on the head's loopback; token auth by default. Yields (file, up's output)."""
    shared = lab.root / "shared"
    shared.mkdir(exist_ok=True)
    ip = lab.ip
    path = tmp_path_factory.mktemp("dashcluster") / f"{NAME}.yaml"
    path.write_text(
        f"name: {NAME}\n"
        f"head: {{host: {ip['head']}, name: head, port: 6333, num_cpus: 1, object_store_memory: 134217728, "
        "dashboard: {host: 127.0.0.1, port: 8265}}\n"
        "workers:\n"
        f"  - {{host: {ip['w1']}, name: w1, num_cpus: 1, object_store_memory: 134217728}}\n"
        f"ssh: {{config_file: {lab.ssh_config}, connect_timeout: 5}}\n"
        f"python: {sys.executable}\n"
        f"storage: {{path: {shared}}}\n"
        "start_timeout_s: 300\n"
    )
    up = raytrain("cluster", "up", str(path), timeout=900)
    ok = False
    try:
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-3000:]
        yield path, up
        ok = True
    finally:
        down = raytrain("cluster", "down", str(path), "-y")
        if ok:  # after a failure, say that failure; lab.down() removes what is left either way
            assert down.returncode == 0, down.stderr[-3000:]
            assert {h: lab.processes(h, "raylet|gcs_server") for h in lab.names} == {h: [] for h in lab.names}


def test_up_prints_the_dashboard_url_and_how_to_log_in(cluster):
    _, up = cluster
    shown = up.stdout + up.stderr
    assert "dashboard: http://127.0.0.1:8265" in up.stdout
    assert "raytrain cluster dashboard FILE" in up.stdout  # it listens on the head's loopback: how to reach it
    assert f"dashboard login: paste the token from ~/.raytrain/clusters/{NAME}/auth_token" in up.stdout
    token = Path(os.path.expanduser(f"~/.raytrain/clusters/{NAME}/auth_token")).read_text().strip()
    assert token and token not in shown


# --- the browser ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def tunnel(path: Path):
    """`raytrain cluster dashboard FILE --port P`, as a user runs it; yields (URL, what it printed so far)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, "-m", "raytrain", "cluster", "dashboard", str(path), "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)  # its own group: the ssh it starts goes down with it
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            log.seek(0)
            assert proc.poll() is None, f"raytrain cluster dashboard exited ({proc.returncode}): {log.read()[-2000:]}"
            assert time.monotonic() < deadline, f"the dashboard tunnel did not open port {port} within 60 s"
            time.sleep(0.2)
        log.seek(0)
        yield f"http://127.0.0.1:{port}", log.read()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


@contextlib.contextmanager
def chromium():
    """Headless Debian chromium under chromedriver, with a throw-away profile; always quit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="raytrain-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1600,1000", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    # Service(path): Selenium must not try to download a driver (no internet here).
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(PAGE_WAIT_S)
        yield driver
    finally:
        try:
            driver.quit()
        finally:
            process = driver.service.process
            if process is not None and process.poll() is None:
                process.kill()
            shutil.rmtree(profile, ignore_errors=True)


def page_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def rows(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [r.text for r in driver.find_elements(By.TAG_NAME, "tr")]


def has_ip(text: str, ip: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(ip)}(?![\d])", text) is not None


def wait_for(driver, what: str, found, shots: Path, timeout: float = PAGE_WAIT_S):
    """Poll `found(driver)` until it is truthy; on timeout fail naming what was not found, with a screenshot."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.5,
                             ignored_exceptions=(StaleElementReferenceException,)).until(found)
    except TimeoutException:
        shot = shots / f"timeout-{re.sub(r'[^a-z0-9]+', '-', what.lower()).strip('-')[:60]}.png"
        try:
            driver.save_screenshot(str(shot))
            text = page_text(driver)
        except WebDriverException as e:
            text = f"(page unreadable: {e.msg})"
        pytest.fail(f"not found within {timeout:.0f} s on {driver.current_url}: {what}\n"
                    f"screenshot: {shot}\npage text (end): {text[-1500:]}", pytrace=False)


def wait_job(path: Path, job_id: str, timeout: float = JOB_WAIT_S) -> dict:
    """The job's status once it has ended (`raytrain tune status JOB --json`); fails with its logs on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        st = raytrain("tune", "status", job_id, "--cluster", str(path), "--json")
        state = json.loads(st.stdout)["status"] if st.returncode == 0 else f"unknown ({st.stderr.strip()[-300:]})"
        if state in ("SUCCEEDED", "FAILED", "STOPPED"):
            return json.loads(st.stdout)
        if time.monotonic() > deadline:
            logs = raytrain("tune", "logs", job_id, "--cluster", str(path), "--no-follow")
            pytest.fail(f"job {job_id} still {state} after {timeout:.0f} s; its logs:\n{logs.stdout[-3000:]}")
        time.sleep(1)


def test_the_dashboard_shows_the_nodes_and_the_submitted_sweep(lab, cluster, artifacts, capsys, tmp_path):
    from selenium.webdriver.common.by import By

    path, _ = cluster
    with capsys.disabled():
        print(f"\ndashboard screenshots: {artifacts}")
    token = Path(os.path.expanduser(f"~/.raytrain/clusters/{NAME}/auth_token")).read_text().strip()
    head_ip, w1_ip = lab.ip["head"], lab.ip["w1"]

    # A tiny sweep submitted from this machine (not a node of the cluster) as a Ray Job.
    (tmp_path / "base.yaml").write_text(tiny_base(1, 1))  # the job's rows, not its training, are what is checked
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"base: base.yaml\nname: {SWEEP}\ncheckpoint: {{storage_path: {lab.root / 'shared' / 'sweeps'}}}\n"
        "search: {algorithm: random, num_samples: 1, seed: 0}\n"
        "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}}\n"
    )
    submit = raytrain("tune", str(sweep), "--cluster", str(path), "--submit")
    assert submit.returncode == 0, submit.stderr[-3000:]
    job_id = submit.stdout.strip().splitlines()[-1]
    assert job_id.startswith(f"raytrain-tune-{SWEEP}-"), submit.stdout[-1000:]

    with tunnel(path) as (url, said), chromium() as driver:
        assert f"dashboard: {url}" in said and f"~/.raytrain/clusters/{NAME}/auth_token" in said, said

        # Without the token: the login box, and no cluster data.
        driver.get(url + "/#/cluster")
        wait_for(driver, f"the '{LOGIN_BOX}' box", lambda d: LOGIN_BOX in page_text(d), artifacts)
        text = page_text(driver)
        assert not has_ip(text, head_ip) and not has_ip(text, w1_ip), "node addresses visible without the token"
        driver.save_screenshot(str(artifacts / "login.png"))

        # Log in through that box, as a user pastes the token.
        box = wait_for(driver, "the token input of the login box", lambda d: d.find_elements(
            By.XPATH, f"//*[@role='dialog'][contains(., '{LOGIN_BOX}')]//input"), artifacts)[0]
        box.send_keys(token)
        box.find_element(By.XPATH, "ancestor::*[@role='dialog']//button[normalize-space()='Submit' or "
                                   "normalize-space()='SUBMIT']").click()

        # Cluster page: both nodes, ALIVE, the head marked as such.
        def nodes_alive(d):
            if LOGIN_BOX in page_text(d):
                return False
            alive = [r for r in rows(d) if "ALIVE" in r]
            head = [r for r in alive if has_ip(r, head_ip) and "(Head)" in r]
            w1 = [r for r in alive if has_ip(r, w1_ip)]
            return head and w1

        wait_for(driver, f"Cluster page: rows ALIVE for the head {head_ip} (Head) and for w1 {w1_ip}, login box gone",
                 nodes_alive, artifacts)
        assert "ray-authentication-token" in [c["name"] for c in driver.get_cookies()]
        driver.save_screenshot(str(artifacts / "cluster.png"))

        # Jobs page: the sweep's job, by its submission id (which names the sweep), while it runs or after.
        driver.get(url + "/#/jobs")
        wait_for(driver, f"Jobs page: a row for {job_id}", lambda d: any(job_id in r for r in rows(d)), artifacts)
        final = wait_job(path, job_id)
        assert final["status"] == "SUCCEEDED", final
        driver.refresh()
        wait_for(driver, f"Jobs page: {job_id} SUCCEEDED",
                 lambda d: any(job_id in r and "SUCCEEDED" in r for r in rows(d)), artifacts)
        assert LOGIN_BOX not in page_text(driver)
        driver.save_screenshot(str(artifacts / "jobs.png"))

    assert {p.name for p in artifacts.glob("*.png")} >= {"login.png", "cluster.png", "jobs.png"}
