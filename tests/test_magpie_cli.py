"""openmagpie's own command line, `magpie` 0.9.0 (PyPI `openmagpie`, Python 3.13), unchanged, through
its verbs against a real `tidings serve` with its scheduler on: the program openmagpie's users already
have must work against /v1 (docs/compatibility.md has the table of verbs).

`.ci/run` installs it in a venv of its own and names the executable in TIDINGS_TEST_MAGPIE; under CI
this module fails, never skips, without it. `auth login` runs as that executable; the other commands
run as it runs them, forked by tests/magpie_driver.py under the same venv's Python, which imported the
CLI once. Each call runs with a HOME of its own (magpie keeps its login in ~/.magpie), its update check
off, and a dead proxy for anything but loopback (`magpie version` asks PyPI and GitHub, which must fail
fast here, not hang)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, update
from sqlalchemy.orm import Session

from app.identity.passwords import hash_password
from app.kit.release import installed_version
from app.models import User
from tests.processes import Running, committed_users, shipped_serve
from tests.shipped import wait_until
from tests.upstream import Upstream, running_upstream
from tests.watches.conftest import serve_items

OWNER = "magpie-cli@example.com"
PASSWORD = "magpie-cli-password"


def magpie_executable() -> str:
    named = os.environ.get("TIDINGS_TEST_MAGPIE") or shutil.which("magpie")
    if named and Path(named).exists():
        return named
    message = "no `magpie` (openmagpie 0.9.0): set TIDINGS_TEST_MAGPIE to its executable (.ci/run does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def magpie_driver(executable: str) -> Iterator[subprocess.Popen[str]]:
    python = Path(executable).with_name("python")
    driver = Path(__file__).with_name("magpie_driver.py")
    process = subprocess.Popen(
        [str(python), str(driver)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


@dataclass
class Magpie:
    """The CLI pointed at one server, as one person with one HOME."""

    executable: str
    # tests/magpie_driver.py under magpie's Python: each command runs as the console script runs it,
    # forked from a process that imported the CLI once (a magpie start-up costs a second of imports).
    driver: subprocess.Popen[str]
    served: Running
    home: Path
    token: str | None

    def environment(self, token: str | None = None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "MAGPIE_NO_UPDATE_CHECK": "1",
            # Nothing leaves loopback: PyPI and GitHub fail at once through a port nobody listens on.
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
            "COLUMNS": "200",
        }
        bearer = token if token is not None else self.token
        if bearer:
            env["MAGPIE_TOKEN"] = bearer
        return env

    def run(self, *args: str, stdin: str = "", ok: bool = True, token: str | None = None) -> str:
        """The command's output; `token` "" runs it without MAGPIE_TOKEN (on the stored login)."""
        request = {
            "args": ["--server", self.served.base, *args],
            "env": self.environment(token),
            "stdin": stdin,
        }
        assert self.driver.stdin is not None and self.driver.stdout is not None
        self.driver.stdin.write(json.dumps(request) + "\n")
        self.driver.stdin.flush()
        reply = json.loads(self.driver.stdout.readline())
        if ok:
            assert reply["code"] == 0, f"magpie {' '.join(args)} exited {reply['code']}:\n{reply['output']}"
        return str(reply["output"])

    def start(self, *args: str) -> subprocess.Popen[str]:
        """A command that waits for something (`auth login`), without MAGPIE_TOKEN; its output is
        read as it comes."""
        env = {**self.environment(), "PYTHONUNBUFFERED": "1"}
        env.pop("MAGPIE_TOKEN", None)
        return subprocess.Popen(
            [self.executable, "--server", self.served.base, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )

    def json_lines(self, *args: str) -> list[dict[str, Any]]:
        lines = self.run(*args, "--jsonl").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def json(self, *args: str) -> dict[str, Any]:
        [found] = self.json_lines(*args)
        return found


@dataclass
class Setting:
    magpie: Magpie
    upstream: Upstream
    var: Path


@pytest.fixture(scope="module")
def setting(database_url: str, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    """One server for the module (a start costs seconds), its scheduler on so feeds are polled and
    watches run; an account whose personal token is MAGPIE_TOKEN."""
    executable = magpie_executable()
    var = tmp_path_factory.mktemp("magpie") / "var"
    home = tmp_path_factory.mktemp("magpie-home")
    with ExitStack() as stack:
        [(_, token)] = stack.enter_context(committed_users(engine, OWNER))
        with Session(engine) as session:
            # Staff: telemetry is the installation's switch.
            session.execute(
                update(User)
                .where(User.email == OWNER)
                .values(is_staff=True, password_hash=hash_password(PASSWORD))
            )
            session.commit()
        upstream = stack.enter_context(running_upstream())
        served = stack.enter_context(shipped_serve(database_url, var, TIDINGS_OUTBOUND_ALLOW_PRIVATE="true"))
        driver = stack.enter_context(magpie_driver(executable))
        yield Setting(Magpie(executable, driver, served, home, token), upstream, var)


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def table_values(output: str) -> list[str]:
    """The VALUE column of a field table magpie printed (its FIELD column may be cut short)."""
    rows = [line.split("|", 1) for line in output.splitlines() if "|" in line]
    return [value.strip() for _, value in rows[1:]]


def source_ids(magpie: Magpie, feed_id: str) -> list[str]:
    return sorted(row["id"] for row in magpie.json_lines("feed", "source", "list", "--feed", feed_id))


def test_feed_verbs_keep_the_sources(setting: Setting, tmp_path: Path) -> None:
    """create, list, get, edit (the CLI sends `"sources": []`: the sources stay), pause, resume; the
    source set's export, a dry run that changes nothing, the round trip that changes nothing; one
    source's get, seek and delete; and delete."""
    magpie, upstream = setting.magpie, setting.upstream
    config = write(
        tmp_path,
        "feed.yaml",
        f"""name: Verbs
poll_interval_seconds: 300
is_active: false
sources:
  - spec: {{kind: rss, url: "{upstream.url("/a.xml")}", name: A}}
  - spec: {{kind: rss, url: "{upstream.url("/b.xml")}"}}
  - spec: {{kind: hn_feed, feed: show, query: rust}}
""",
    )
    assert "Created feed Verbs" in magpie.run("feed", "create", "-f", config, "--yes")
    [feed] = [row for row in magpie.json_lines("feed", "list") if row["name"] == "Verbs"]
    feed_id = feed["id"]
    detail = magpie.json("feed", "get", feed_id)
    # openmagpie's kind name is taken on input; the answer names it as Tidings does.
    assert sorted(s["spec"]["kind"] for s in detail["sources"]) == ["board_feed", "rss", "rss"]
    before = source_ids(magpie, feed_id)
    assert len(before) == 3

    edit = write(tmp_path, "edit.yaml", "name: Verbs renamed\npoll_interval_seconds: 600\nis_active: false\n")
    assert "Updated feed Verbs renamed" in magpie.run("feed", "edit", feed_id, "-f", edit, "--yes")
    assert magpie.json("feed", "get", feed_id)["poll_interval_seconds"] == 600
    assert source_ids(magpie, feed_id) == before

    assert "Resumed feed" in magpie.run("feed", "resume", feed_id)
    assert "Paused feed" in magpie.run("feed", "pause", feed_id)
    assert magpie.json("feed", "get", feed_id)["is_active"] is False

    exported = tmp_path / "sources.yaml"
    magpie.run("feed", "source", "export", "--feed", feed_id, "-o", str(exported))
    assert exported.read_text().count("spec:") == 3
    only_one = write(
        tmp_path, "one.yaml", f'sources:\n  - spec: {{kind: rss, url: "{upstream.url("/a.xml")}"}}\n'
    )
    dry = magpie.run("feed", "source", "set", "--feed", feed_id, "-f", only_one, "--dry-run")
    assert "would: added=1 | removed=3 | persisted=0 | total=1" in dry
    assert source_ids(magpie, feed_id) == before
    again = magpie.run("feed", "source", "set", "--feed", feed_id, "-f", str(exported), "--yes")
    assert "did: added=0 | removed=0 | persisted=3 | total=3" in again
    assert source_ids(magpie, feed_id) == before

    one = before[0]
    assert f"source {one}" in magpie.run("feed", "source", "get", one)
    preview = magpie.run("feed", "source", "seek", one, "--to", "yesterday", "--dry-run")
    assert "would move 1 of 1 source(s)" in preview and "rewound=1" in preview
    moved = magpie.run("feed", "source", "seek", "--feed", feed_id, "--to", "2h", "--yes")
    assert "moved 3 of 3 source(s)" in moved and "rewound=3" in moved
    [watermark] = {
        row["last_event_at"] for row in magpie.json_lines("feed", "source", "list", "--feed", feed_id)
    }
    assert watermark < detail["sources"][0]["last_event_at"]
    assert "unchanged=0" in magpie.run("feed", "source", "seek", one, "--to", "oldest", "--yes")
    refused = magpie.run("feed", "source", "seek", one, "--to", "400d", "--yes", ok=False)
    assert "retention" in refused

    assert "Deleted source" in magpie.run("feed", "source", "delete", before[1], "--yes")
    assert source_ids(magpie, feed_id) == [before[0], before[2]]
    assert "HTTP 404" in magpie.run("feed", "source", "get", before[1], ok=False)

    assert "Deleted feed" in magpie.run("feed", "delete", feed_id, "--yes")
    assert all(row["id"] != feed_id for row in magpie.json_lines("feed", "list"))


def test_items_watches_activity_and_deliveries(setting: Setting, tmp_path: Path) -> None:
    """A paused feed, a watch on it (a webhook, then a log action), the feed resumed: the poll stores
    the items and the watch runs on them. Then every item, watch, action, activity and delivery verb."""
    magpie, upstream = setting.magpie, setting.upstream
    upstream.serve("/hook", "ok", 200)
    serve_items(upstream, [("m1", "First"), ("m2", "Second")], path="/items.xml")
    feed_config = f"""name: Watched
is_active: false
sources:
  - spec: {{kind: rss, url: "{upstream.url("/items.xml")}", name: Items}}
"""
    magpie.run("feed", "create", "-f", write(tmp_path, "feed.yaml", feed_config), "--yes")
    [feed] = [row for row in magpie.json_lines("feed", "list") if row["name"] == "Watched"]
    watch_config = f"""name: Watching
feed_ids: [{feed["id"]}]
actions:
  - kind: webhook
    config: {{url: "{upstream.url("/hook")}"}}
  - kind: log
    config: {{prefix: magpie}}
"""
    assert "Created watch Watching" in magpie.run(
        "watch", "create", "-f", write(tmp_path, "w.yaml", watch_config), "--yes"
    )
    [watch] = [row for row in magpie.json_lines("watch", "list") if row["name"] == "Watching"]
    watch_id = watch["id"]
    assert magpie.json("watch", "get", watch_id)["name"] == "Watching"
    webhook, log = magpie.json_lines("watch", "action", "list", "--watch", watch_id)
    assert magpie.json("watch", "action", "get", log["id"])["kind"] == "log"
    magpie.run("feed", "resume", feed["id"])

    def both_logged() -> bool:
        # Asked over plain HTTP: a magpie call costs a second of start-up.
        runs = httpx.get(
            f"{magpie.served.base}/v1/actions/{log['id']}/activity",
            headers={"Authorization": f"Bearer {magpie.token}"},
        ).json()["items"]
        return len(runs) == 2 and all(run["state"] == "succeeded" for run in runs)

    wait_until(both_logged, "the watch ran its log action on both items", setting.magpie.served)
    items = magpie.json_lines("feed", "item", "list", "--feed", feed["id"])
    assert sorted(item["external_id"] for item in items) == ["m1", "m2"]
    assert magpie.json("feed", "item", "get", items[0]["id"])["external_id"] == items[0]["external_id"]

    # The export's windows filter the runs: 2019 holds none of today's, the last hour both.
    old = tmp_path / "2019.csv"
    bounds = ("--completed-since", "2019-01-01", "--completed-until", "2020-01-01")
    assert "Wrote 0 run(s)" in magpie.run(
        "activity", "export", "--action", log["id"], *bounds, "-o", str(old)
    )
    recent = tmp_path / "recent.csv"
    exported = magpie.run(
        "activity", "export", "--action", log["id"], "--completed-since", "1h", "-o", str(recent)
    )
    assert "Wrote 2 run(s)" in exported
    assert "First" in recent.read_text() and "Second" in recent.read_text()
    summary = magpie.run("activity", "summary", "--action", log["id"])
    assert "succeeded" in summary
    [run, _] = [row["run"] for row in magpie.json_lines("activity", "list", "--action", log["id"])]
    assert magpie.json("activity", "get", run["id"])["run"]["id"] == run["id"]
    deliveries = magpie.json_lines("delivery", "list", "--action", webhook["id"])
    assert deliveries and magpie.json("delivery", "get", deliveries[0]["id"])["id"] == deliveries[0]["id"]

    # Backfill the log action over what the webhook passed in the last hour: both items are done, so
    # only a replace has work; it runs the log action on them again.
    window = ("--action", log["id"], "--completed-since", "1h")
    additive = table_values(magpie.run("backfill", "submit", *window, "--dry-run"))
    assert additive[1:] == ["2 (present 2, pruned 0)", "0"], additive
    replacing = table_values(magpie.run("backfill", "submit", *window, "--replace", "--dry-run"))
    assert replacing[1:] == ["2 (present 2, pruned 0)", "2 (target + downstream)", "2"], replacing
    queued = magpie.run("backfill", "submit", *window, "--replace", "--yes")
    [backfill_id] = {word for word in queued.split() if len(word) == 26}
    job = magpie.json("backfill", "status", backfill_id)
    assert (job["state"], job["deleted"], job["enqueued"]) == ("done", 2, 2)
    assert backfill_id in [row["id"] for row in magpie.json_lines("backfill", "list")]
    wait_until(both_logged, "the backfill's runs of the log action ran", setting.magpie.served)

    # The action verbs, on a chain that is there to be changed.
    extra = write(tmp_path, "action.yaml", "kind: log\nconfig: {prefix: extra}\n")
    assert "Added log" in magpie.run("watch", "action", "add", "--watch", watch_id, "-f", extra, "--yes")
    added = magpie.json_lines("watch", "action", "list", "--watch", watch_id)[-1]
    edited = write(tmp_path, "edited.yaml", "kind: log\nconfig: {prefix: edited}\n")
    assert "Updated action" in magpie.run("watch", "action", "edit", added["id"], "-f", edited, "--yes")
    assert "Deleted action" in magpie.run("watch", "action", "delete", added["id"], "--yes")
    assert "Paused watch" in magpie.run("watch", "pause", watch_id)
    assert "Resumed watch" in magpie.run("watch", "resume", watch_id)
    renamed = (
        watch_config.replace("name: Watching", "name: Watching still")
        .replace("  - kind: webhook", f"  - id: {webhook['id']}\n    kind: webhook")
        .replace("  - kind: log", f"  - id: {log['id']}\n    kind: log")
    )
    magpie.run("watch", "edit", watch_id, "-f", write(tmp_path, "w2.yaml", renamed), "--yes")
    assert magpie.json("watch", "get", watch_id)["name"] == "Watching still"
    assert "Deleted watch" in magpie.run("watch", "delete", watch_id, "--yes")


def test_telemetry_and_version(setting: Setting) -> None:
    magpie = setting.magpie
    assert "Telemetry enabled (mode: on)" in magpie.run("telemetry", "enable")
    assert "Telemetry mode: on" in magpie.run("telemetry", "status")
    assert "Telemetry disabled (mode: off)" in magpie.run("telemetry", "disable")
    # The server's version from /healthz; PyPI and GitHub are out of reach, which the CLI tolerates.
    assert f"Server  {installed_version()}" in magpie.run("version")


def test_auth_status_and_personal_tokens(setting: Setting) -> None:
    magpie = setting.magpie
    status = magpie.run("auth", "status")
    assert f"Signed in as {OWNER}" in status and "MAGPIE_TOKEN" in status
    created = magpie.run("auth", "token", "create", "--name", "laptop")
    [token] = [line.strip() for line in created.splitlines() if line.strip().startswith("tdg_")]
    [row] = [row for row in magpie.json_lines("auth", "token", "list") if row["name"] == "laptop"]
    assert token[:12].endswith(row["last_four"])
    assert f"Signed in as {OWNER}" in magpie.run("auth", "status", token=token)
    assert "Revoked token" in magpie.run("auth", "token", "revoke", row["id"])
    assert "was rejected" in magpie.run("auth", "status", token=token, ok=False)
    assert all(listed["id"] != row["id"] for listed in magpie.json_lines("auth", "token", "list"))


def approve_on_the_page(base: str, user_code: str) -> None:
    """What the person does in the browser: signs in, opens the authorize URL, approves the code (the
    page's form, posted with the session cookie and this service's Origin)."""
    with httpx.Client(base_url=base, headers={"Origin": base}) as browser:
        signed_in = browser.post("/v1/auth/login", json={"email": OWNER, "password": PASSWORD})
        assert signed_in.status_code == 200, signed_in.text
        page = browser.get("/account/device", params={"user_code": user_code})
        assert page.status_code == 200 and user_code in page.text
        done = browser.post("/account/device", data={"user_code": user_code, "decision": "approve"})
        assert done.status_code == 200, done.text


def test_login_by_device_flow_refresh_and_logout(
    setting: Setting, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`auth login` (the device flow, approved on the page), a refresh when the access token is due,
    `auth logout` ending that login; then a personal token signed in with `--token` survives a logout."""
    base = setting.magpie.served.base
    magpie = Magpie(
        setting.magpie.executable,
        setting.magpie.driver,
        setting.magpie.served,
        tmp_path_factory.mktemp("login"),
        None,
    )
    login = magpie.start("auth", "login", "--no-browser")
    assert login.stdout is not None
    shown: list[str] = []
    for line in login.stdout:
        shown.append(line)
        if line.startswith("Verification code:"):
            approve_on_the_page(base, line.split(":", 1)[1].strip())
            break
    rest, _ = login.communicate(timeout=60)
    assert login.returncode == 0, "".join(shown) + rest
    assert f"Signed in as {OWNER}" in rest
    assert any(f"{base}/account/device?user_code=" in line for line in shown)
    assert f"Signed in as {OWNER}" in magpie.run("auth", "status")

    # The access token is due (its expiry moved into the refresh leeway): the next command refreshes.
    config_path = magpie.home / ".magpie" / "config.json"
    config = json.loads(config_path.read_text())
    stored = config["envs"]["local"]
    first_access, first_refresh = stored["access_token"], stored["refresh_token"]
    stored["token_expires_at"] = "2020-01-01T00:00:00Z"
    config_path.write_text(json.dumps(config))
    magpie.run("feed", "list")
    refreshed = json.loads(config_path.read_text())["envs"]["local"]
    assert refreshed["access_token"] != first_access and refreshed["refresh_token"] != first_refresh
    me = httpx.get(f"{base}/v1/auth/me", headers={"Authorization": f"Bearer {first_access}"})
    assert me.status_code == 401, "the refreshed pair's old access token is revoked"

    assert "Logged out." in magpie.run("auth", "logout")
    gone = httpx.get(f"{base}/v1/auth/me", headers={"Authorization": f"Bearer {refreshed['access_token']}"})
    assert gone.status_code == 401
    reused = httpx.post(f"{base}/v1/auth/tokens/refresh", json={"refresh_token": first_refresh})
    assert reused.status_code == 401 and reused.json()["error"] == "invalid_grant"

    token = setting.magpie.token or ""
    assert f"Signed in as {OWNER}" in magpie.run("auth", "login", "--token", stdin=token + "\n")
    magpie.run("auth", "logout")
    kept = httpx.get(f"{base}/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert kept.status_code == 200, "a logout never revokes a personal access token"
