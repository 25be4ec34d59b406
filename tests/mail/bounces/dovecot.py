"""A throwaway Dovecot IMAP server on a free loopback port (Debian's dovecot-imapd): its configuration,
mail and logs in a temporary folder, one user with a fixed password, plaintext login allowed (loopback
only). Run as root, mail belongs to `nobody`; run as anyone else, every Dovecot process is that user."""

from __future__ import annotations

import imaplib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.processes import free_port

DOVECOT = "/usr/sbin/dovecot"
USER = "bounces"
PASSWORD = "bounce-mailbox-pass"


@dataclass
class Dovecot:
    port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"imap://{USER}:{PASSWORD}@127.0.0.1:{self.port}/INBOX"

    def client(self) -> imaplib.IMAP4:
        client = imaplib.IMAP4("127.0.0.1", self.port, timeout=10)
        client.login(USER, PASSWORD)
        client.select("INBOX")
        return client

    def deliver(self, message: bytes) -> None:
        """Put a message in the inbox, unseen, as the MTA's local delivery would."""
        client = self.client()
        try:
            status, data = client.append("INBOX", None, None, message)
            assert status == "OK", data
        finally:
            client.logout()

    def flags(self) -> list[str]:
        """Each message's flags, in order (an expunged message is gone)."""
        client = self.client()
        try:
            status, data = client.fetch("1:*", "(FLAGS)") if self.count(client) else ("OK", [])
            assert status == "OK", data
            return [item.decode() for item in data if isinstance(item, bytes)]
        finally:
            client.logout()

    @staticmethod
    def count(client: imaplib.IMAP4) -> int:
        status, data = client.select("INBOX")
        assert status == "OK", data
        return int(data[0] or 0)

    def log(self) -> str:
        path = self.directory / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def running_dovecot() -> Iterator[Dovecot]:
    if not os.access(DOVECOT, os.X_OK):
        pytest.skip("Dovecot is not installed (Debian: apt-get install dovecot-imapd)")
    # Not under pytest's tmp_path: its folders are private to the test's user, and the mail processes
    # of a root Dovecot run as `nobody`.
    directory = Path(tempfile.mkdtemp(prefix="tidings-dovecot-"))
    directory.chmod(0o755)
    mail = directory / "mail"
    mail.mkdir()
    port = free_port()
    if os.geteuid() == 0:
        owner = pwd.getpwnam("nobody")
        os.chown(mail, owner.pw_uid, owner.pw_gid)
        accounts = ""
    else:
        owner = pwd.getpwuid(os.geteuid())
        accounts = f"default_login_user = {owner.pw_name}\ndefault_internal_user = {owner.pw_name}\n"
    (directory / "dovecot.conf").write_text(
        f"""base_dir = {directory}/run
state_dir = {directory}/state
log_path = {directory}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
# A refused login answers at once (the default waits 2 s, and longer after each failure from one address).
auth_failure_delay = 0
first_valid_uid = 1
mail_location = maildir:{mail}/%u
{accounts}passdb {{
  driver = static
  args = password={PASSWORD}
}}
userdb {{
  driver = static
  args = uid={owner.pw_uid} gid={owner.pw_gid} home={mail}/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
"""
    )
    (directory / "state").mkdir()
    config = str(directory / "dovecot.conf")
    server = Dovecot(port, directory)
    # In the foreground (-F): the test owns the master process and stops it by its pid.
    with (directory / "master.out").open("wb") as out:
        master = subprocess.Popen([DOVECOT, "-F", "-c", config], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                server.client().logout()
                break
            except (OSError, imaplib.IMAP4.error):
                if master.poll() is not None or time.monotonic() > deadline:
                    output = (directory / "master.out").read_text(errors="replace")
                    pytest.fail(f"Dovecot does not answer on port {port}:\n{output}\n{server.log()}")
                time.sleep(0.1)
        yield server
    finally:
        master.terminate()  # the master stops its own children
        try:
            master.wait(timeout=20)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()
        shutil.rmtree(directory, ignore_errors=True)
