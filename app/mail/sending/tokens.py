"""Signed tokens in the links of sent emails: open pixel, click redirect, unsubscribe, form confirmation.

Each kind has its own salt, so a token of one kind is never accepted as another. A click token carries
the exact URL it redirects to: the redirect goes nowhere that was not signed (no open redirect).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from itsdangerous import BadData, URLSafeSerializer, URLSafeTimedSerializer

# A confirmation link of a hosted form is good for a week, as most double opt-in services allow.
CONFIRM_MAX_AGE_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True, slots=True)
class Signup:
    form_id: int
    email: str
    first_name: str | None
    last_name: str | None


class MailTokens:
    def __init__(self, secret_key: str) -> None:
        self._open = URLSafeSerializer(secret_key, salt="tidings.open")
        self._click = URLSafeSerializer(secret_key, salt="tidings.click")
        self._unsubscribe = URLSafeSerializer(secret_key, salt="tidings.unsubscribe")
        self._confirm = URLSafeTimedSerializer(secret_key, salt="tidings.form-confirm")

    def open_token(self, deliverable_id: int) -> str:
        return self._open.dumps(deliverable_id)

    def read_open(self, token: str) -> int | None:
        return _int_or_none(_loads(self._open, token))

    def click_token(self, deliverable_id: int, url: str) -> str:
        return self._click.dumps([deliverable_id, url])

    def read_click(self, token: str) -> tuple[int, str] | None:
        value = _loads(self._click, token)
        if (
            isinstance(value, list)
            and len(value) == 2
            and _int_or_none(value[0]) is not None
            and isinstance(value[1], str)
        ):
            return value[0], value[1]
        return None

    def unsubscribe_token(self, deliverable_id: int) -> str:
        return self._unsubscribe.dumps(deliverable_id)

    def read_unsubscribe(self, token: str) -> int | None:
        return _int_or_none(_loads(self._unsubscribe, token))

    def confirm_token(self, signup: Signup) -> str:
        return self._confirm.dumps([signup.form_id, signup.email, signup.first_name, signup.last_name])

    def read_confirm(self, token: str) -> Signup | None:
        found = self.read_confirm_issued(token)
        return found[0] if found is not None else None

    def read_confirm_issued(self, token: str) -> tuple[Signup, datetime] | None:
        """The sign-up and when its token was made (whole seconds, UTC): a confirmation must not undo
        an unsubscribe that came after the link was sent."""
        try:
            value, issued_at = self._confirm.loads(
                token, max_age=CONFIRM_MAX_AGE_SECONDS, return_timestamp=True
            )
        except BadData:
            return None
        if not (isinstance(value, list) and len(value) == 4 and _int_or_none(value[0]) is not None):
            return None
        form_id, email, first_name, last_name = value
        names_ok = all(name is None or isinstance(name, str) for name in (first_name, last_name))
        if not isinstance(email, str) or not names_ok:
            return None
        return Signup(form_id, email, first_name, last_name), issued_at


def _loads(serializer: URLSafeSerializer, token: str) -> object:
    try:
        return serializer.loads(token)
    except BadData:
        return None


def _int_or_none(value: object) -> int | None:
    # bool is an int in Python; a signed `true` is not a row id.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
