"""`tidings --version` and `tidings users create|list|update|set-password` on the test database (SQLite
or PostgreSQL): sign-up's password rules, prompts instead of passwords on the command line, readable
tables, and exit status 1 with one clear line for unknown users and bad values."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.identity.accounts import find_user_by_email
from app.identity.passwords import verify_password
from app.identity.sessions import start_session
from tests.cli_runner import Tidings, table, tidings_fixture  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def password_hash(tidings: Tidings, email: str) -> str | None:
    return tidings.scalar("SELECT password_hash FROM users WHERE email_key = :e", e=email)  # type: ignore[no-any-return]


def account_value(tidings: Tidings, email: str, column: str) -> object:
    return tidings.scalar(
        f"SELECT accounts.{column} FROM accounts JOIN users ON users.account_id = accounts.id"
        " WHERE users.email_key = :e",
        e=email,
    )


def test_version_prints_the_installed_version(tidings: Tidings) -> None:
    assert tidings.ok("--version") == f"tidings {version('tidings')}\n"


def test_users_create_refuses_a_password_sign_up_would_refuse(tidings: Tidings) -> None:
    line = tidings.fails(
        "users", "create", "--email", "short@example.com", "--name", "S", "--password", "1234567"
    )
    assert line == "error: The password is too short: at least 8 characters."
    line = tidings.fails(
        "users", "create", "--email", "long@example.com", "--name", "L", "--password", "x" * 129
    )
    assert "at most 128 characters" in line
    assert (
        tidings.scalar(
            "SELECT count(*) FROM users WHERE email_key IN ('short@example.com', 'long@example.com')"
        )
        == 0
    )


def test_users_create_reads_the_password_from_stdin(tidings: Tidings) -> None:
    out = tidings.ok(
        "users", "create", "--email", "piped@example.com", "--name", "P", "--password-stdin",
        input="correct horse\n",
    )  # fmt: skip
    assert out.strip().isdigit()
    assert verify_password("correct horse", password_hash(tidings, "piped@example.com"))
    line = tidings.fails(
        "users", "create", "--email", "p2@example.com", "--name", "P", "--password-stdin", input="short\n"
    )
    assert "at least 8 characters" in line


def test_users_create_takes_one_way_of_giving_a_password(tidings: Tidings) -> None:
    line = tidings.fails(
        "users",
        "create",
        "--email",
        "two@example.com",
        "--name",
        "T",
        "--password",
        "long enough",
        "--no-password",
    )
    assert "one of --password, --password-stdin and --no-password" in line


def test_users_create_without_a_terminal_makes_a_token_only_user_and_says_so(tidings: Tidings) -> None:
    result = tidings("users", "create", "--email", "script@example.com", "--name", "S")
    assert result.exit_code == 0, result.stderr
    assert "users set-password script@example.com" in result.stderr
    assert password_hash(tidings, "script@example.com") is None
    quiet = tidings("users", "create", "--email", "tokens@example.com", "--name", "T", "--no-password")
    assert quiet.exit_code == 0 and quiet.stderr == ""


class Output:
    """A process's output as it arrives, waited on for the n-th time a text appears in it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = b""

    def wait_for(self, wanted: bytes, times: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.seen.count(wanted) < times:
            assert time.monotonic() < deadline, self.seen
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if ready:
                chunk = os.read(self.fd, 1024)
                assert chunk, self.seen
                self.seen += chunk


def test_users_create_at_a_terminal_asks_for_the_password_twice(tidings: Tidings) -> None:
    """A real terminal (a pseudo-terminal as stdin, in a session of its own so /dev/tty is not the
    test runner's): the prompt asks twice and keeps asking while the two differ."""
    import pty
    import termios

    controller, terminal = pty.openpty()
    env = {key: value for key, value in tidings.env().items() if value is not None}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")},
        **env,
        "PYTHONPATH": str(ROOT),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "users", "create", "--email", "typed@example.com", "--name", "T"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tidings.directory,
        env=env,
        start_new_session=True,
    )

    def type_in(answer: bytes) -> None:
        """Type once the prompt has turned echo off: turning it off discards what was typed before."""
        deadline = time.monotonic() + 30
        while termios.tcgetattr(terminal)[3] & termios.ECHO:
            assert time.monotonic() < deadline, "the prompt never turned echo off"
            time.sleep(0.01)
        os.write(controller, answer)

    try:
        # The prompts are on stderr; the answers are typed on the terminal, echo off.
        assert process.stderr is not None
        out = Output(process.stderr.fileno())
        out.wait_for(b"Password:")
        type_in(b"typed secret\n")
        out.wait_for(b"Repeat for confirmation:")
        type_in(b"another one\n")
        out.wait_for(b"do not match")
        out.wait_for(b"Password:", times=2)
        type_in(b"typed secret\n")
        out.wait_for(b"Repeat for confirmation:", times=2)
        type_in(b"typed secret\n")
        stdout, rest = process.communicate(timeout=60)
        stderr = out.seen + rest
    finally:
        os.close(controller)
        os.close(terminal)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert stdout.strip().isdigit(), stdout
    assert b"typed secret" not in stdout + stderr  # not echoed
    assert verify_password("typed secret", password_hash(tidings, "typed@example.com"))


def test_users_list_shows_each_user_with_their_account(tidings: Tidings) -> None:
    tidings.ok("users", "create", "--email", "listed@example.com", "--name", "Listed Person", "--no-password",
               "--plan", "free", "--contact-limit", "50", "--username", "listed")  # fmt: skip
    tidings.ok("users", "create", "--email", "boss@example.com", "--name", "Boss", "--staff",
               "--password", "boss password", "--daily-send-limit", "0")  # fmt: skip
    rows = {row["EMAIL"]: row for row in table(tidings.ok("users", "list"))}
    listed = rows["listed@example.com"]
    assert listed["NAME"] == "Listed Person"
    assert listed["USERNAME"] == "listed"
    assert listed["PLAN"] == "free"
    assert listed["CONTACTS"] == "0/50"
    assert listed["DAILY SENDS"] == "default"
    assert (listed["STAFF"], listed["PASSWORD"]) == ("no", "no")
    boss = rows["boss@example.com"]
    assert (boss["PLAN"], boss["DAILY SENDS"], boss["STAFF"], boss["PASSWORD"]) == (
        "empire",
        "no cap",
        "yes",
        "yes",
    )
    assert boss["USERNAME"] == "-"


def test_users_update_changes_plan_limits_and_staff(tidings: Tidings) -> None:
    email = "growing@example.com"
    tidings.ok("users", "create", "--email", email, "--name", "G", "--no-password", "--plan", "free")
    out = tidings.ok("users", "update", email.upper(), "--plan", "lifetime", "--contact-limit", "25000",
                     "--daily-send-limit", "300", "--staff")  # fmt: skip
    assert out == f"{email}: plan lifetime, contacts 0/25000, daily sends 300, staff yes\n"
    assert account_value(tidings, email, "plan") == "lifetime"
    assert account_value(tidings, email, "contact_limit") == 25000
    assert account_value(tidings, email, "daily_send_limit") == 300
    assert tidings.scalar("SELECT is_staff FROM users WHERE email_key = :e", e=email) in (True, 1)
    out = tidings.ok("users", "update", email, "--default-daily-send-limit", "--no-staff")
    assert out == f"{email}: plan lifetime, contacts 0/25000, daily sends default, staff no\n"
    assert account_value(tidings, email, "daily_send_limit") is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("nobody@example.com", "--plan", "free"), "error: No user with the email nobody@example.com."),
        (("bad@example.com", "--plan", "gold"), "Unknown plan 'gold'"),
        (("bad@example.com", "--contact-limit", "-5"), "The contact limit must not be negative."),
        (("bad@example.com", "--daily-send-limit", "-1"), "The daily send limit must not be negative."),
        (("bad@example.com", "--daily-send-limit", "5", "--default-daily-send-limit"), "not both"),
        (("bad@example.com",), "nothing to change"),
    ],
)
def test_users_update_refuses_unknown_users_and_bad_values(
    tidings: Tidings, args: tuple[str, ...], says: str
) -> None:
    tidings.ok("users", "create", "--email", "bad@example.com", "--name", "B", "--no-password")
    assert says in tidings.fails("users", "update", *args)
    assert account_value(tidings, "bad@example.com", "plan") == "empire"
    assert account_value(tidings, "bad@example.com", "contact_limit") == 10000


def test_users_set_password_prompts_twice_and_signs_the_user_out(tidings: Tidings) -> None:
    email = "forgetful@example.com"
    tidings.ok("users", "create", "--email", email, "--name", "F", "--password", "old password")
    with Session(tidings.engine) as session:
        user = find_user_by_email(session, email)
        assert user is not None
        start_session(session, user)
        start_session(session, user)
        session.commit()
    result = tidings("users", "set-password", email, input="new password\nnew password\n")
    assert result.exit_code == 0, result.stderr
    # (CliRunner's stand-in for the hidden prompt echoes a blank line on stdout; a terminal does not.)
    assert result.stdout.strip() == f"password set for {email}; 2 sign-in sessions ended"
    assert "Repeat for confirmation" in result.stderr
    assert verify_password("new password", password_hash(tidings, email))
    assert (
        tidings.scalar(
            "SELECT count(*) FROM sessions JOIN users ON users.id = sessions.user_id WHERE email_key = :e",
            e=email,
        )
        == 0
    )
    tidings.ok("users", "set-password", email, "--password-stdin", input="from a script\n")
    assert verify_password("from a script", password_hash(tidings, email))


def test_users_set_password_refuses_a_short_password_and_an_unknown_user(tidings: Tidings) -> None:
    email = "kept@example.com"
    tidings.ok("users", "create", "--email", email, "--name", "K", "--password", "kept password")
    line = tidings.fails("users", "set-password", email, "--password-stdin", input="tiny\n")
    assert line == "error: The password is too short: at least 8 characters."
    assert verify_password("kept password", password_hash(tidings, email))
    line = tidings.fails(
        "users", "set-password", "ghost@example.com", "--password-stdin", input="long enough\n"
    )
    assert line == "error: No user with the email ghost@example.com."
