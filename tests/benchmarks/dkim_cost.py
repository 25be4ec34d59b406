"""What DKIM signing costs an email in-process, beyond the RSA signature: a script that prints figures.

A script, not a test (pytest does not collect this folder); it asserts nothing. Run from the repository
root, alternating the commits to compare in separate processes (a second worktree of the base):

    python3 tests/benchmarks/dkim_cost.py [--emails 200] [--rounds 9]

The emails are send_rig's campaign (about 9 KB: 5 KB of html with seven links and `{{ first_name }}`
merge tags, its text part made from the html, List-Id and Feedback-ID) rendered by
app.mail.sending.render for `--emails` recipients, and signed as the send worker signs them
(`DkimSigner.sign`) with an RSA-2048 key of the From domain. Each figure is the best of `--rounds`
rounds over every email (the figures taken in turn in each round), in microseconds an email:

- render: `render` alone, as for an email a key signs (`to_sign`: with what render knows of it);
- render_unsigned: `render` as for an email no key signs (what most sends pay);
- sign: `DkimSigner.sign` with the real key;
- rsa: the RSA signature alone (OpenSSL, over one digest);
- beyond: sign less rsa, what signing costs beyond the RSA signature;
- sign_constant: `DkimSigner.sign` with the RSA signature replaced by a constant of its length
  (monkeypatched here only): the same figure as beyond, measured directly and without the RSA
  signature's noise;
- render_and_sign_constant: both, for work moved between render and the signer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The repository (app) and this folder (send_rig), wherever the script is run from.
_here = Path(__file__).resolve().parent
sys.path[:0] = [path for path in (str(_here.parents[1]), str(_here)) if path not in sys.path]

from send_rig import FROM_DOMAIN, NEWSLETTER, RECIPIENT_DOMAIN, SECRET_KEY, SUBJECT  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.kit.time import utcnow  # noqa: E402
from app.mail.dkim_service import create_key  # noqa: E402
from app.mail.sending import dkim  # noqa: E402
from app.mail.sending.dkim import DkimSigner  # noqa: E402
from app.mail.sending.render import Recipient, campaign_headers, compile_campaign, render  # noqa: E402
from app.mail.sending.tokens import MailTokens  # noqa: E402
from app.models import DkimKey  # noqa: E402

BASE_URL = "http://127.0.0.1:8000"
FROM_EMAIL = f"news@{FROM_DOMAIN}"


def signer_with_a_key() -> DkimSigner:
    """A signer holding an RSA key of the From domain, made as `tidings dkim create` makes it (in an
    in-memory SQLite database holding only the keys' table)."""
    engine = create_engine("sqlite://")
    DkimKey.__table__.create(engine)  # type: ignore[attr-defined]
    with Session(engine) as session:
        create_key(session, SECRET_KEY, FROM_DOMAIN, selector=None, algorithm="rsa", now=utcnow())
        session.commit()
        signer = DkimSigner(SECRET_KEY)
        signer.refresh(session)
    engine.dispose()
    return signer


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--emails", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()

    tokens = MailTokens(SECRET_KEY)
    compiled = compile_campaign(
        1, SUBJECT, NEWSLETTER, "The Weekly Tidings", FROM_EMAIL, campaign_headers(1, 1, 1, BASE_URL)
    )
    recipients = [
        Recipient(100_000 + n, f"r{n}@{RECIPIENT_DOMAIN}", f"First{n}", f"Last{n}", {})
        for n in range(args.emails)
    ]
    signer = signer_with_a_key()
    [key] = signer.keys_for(FROM_DOMAIN)

    def render_all() -> list[bytes]:
        return [
            render(compiled, recipient, tokens, BASE_URL, to_sign=True).message for recipient in recipients
        ]

    messages = render_all()

    def render_all_unsigned() -> None:
        for recipient in recipients:
            render(compiled, recipient, tokens, BASE_URL)

    def sign_all() -> None:
        for message in messages:
            signer.sign(message, FROM_EMAIL)

    def render_and_sign_all() -> None:
        for recipient in recipients:
            signer.sign(render(compiled, recipient, tokens, BASE_URL, to_sign=True).message, FROM_EMAIL)

    digest = b"\x01" * 32

    def rsa_all() -> None:
        for _ in messages:
            key.sign_digest(digest)

    real_signature = dkim.SigningKey.sign_digest
    constant = key.sign_digest(digest)

    def with_constant_signature(run: Callable[[], object]) -> Callable[[], object]:
        def constant_run() -> object:
            dkim.SigningKey.sign_digest = lambda self, digest: constant  # type: ignore[method-assign]
            try:
                return run()
            finally:
                dkim.SigningKey.sign_digest = real_signature  # type: ignore[method-assign]

        return constant_run

    runs = {
        "render": render_all,
        "render_unsigned": render_all_unsigned,
        "sign": sign_all,
        "rsa": rsa_all,
        "sign_constant": with_constant_signature(sign_all),
        "render_and_sign_constant": with_constant_signature(render_and_sign_all),
    }
    # Round by round, each figure in turn: a machine growing busier weighs on all of them.
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(args.rounds):
        for name, run in runs.items():
            best[name] = min(best[name], timed(run))
    count = len(messages)
    figures = {name: seconds / count * 1e6 for name, seconds in best.items()}
    figures["beyond"] = figures["sign"] - figures["rsa"]
    figures = {name: round(value, 2) for name, value in figures.items()}
    size = sum(map(len, messages)) / count
    print(json.dumps({**figures, "email_bytes": round(size), "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
