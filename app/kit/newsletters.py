"""What the watch domain asks of the email domain when a watch's `email` action turns items into a
campaign, and nothing more: the request (`Newsletter`), its answer (`Published`), the refusal, and the
desk that takes them (`NewsletterDesk`). The email domain implements the desk
(app/mail/newsletter_service.py); the app (routes) and the scheduler (jobs) hand it to the watch domain,
so neither domain imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from sqlalchemy.orm import Session

NewsletterMode = Literal["send", "draft"]


@dataclass(frozen=True, slots=True)
class Newsletter:
    """One campaign to make from a watch's items: its subject and html are final but for the email
    API's own merge tags (`{{ first_name }}`, `{{ unsubscribe_url }}`), which the send fills per contact."""

    account_id: int
    list_ids: list[int]
    title: str
    subject: str
    html: str
    # None: the account's own (its first user's name and address).
    from_name: str | None
    from_email: str | None
    # `send`: scheduled now, out through the usual fan-out; `draft`: left for a person to send.
    mode: NewsletterMode
    # The same for every attempt at the same runs: a retry after a crash finds the campaign it made.
    key: str


@dataclass(frozen=True, slots=True)
class Published:
    campaign_id: int
    # Whether it was scheduled to go out (False: a draft, or refused to send for now).
    scheduled: bool


class NewsletterRefused(Exception):
    """The account may not have this campaign (its plan, its lists gone): retrying changes nothing.
    `str()` is a message for a person."""


class NewsletterDesk(Protocol):
    def problems(self, session: Session, account_id: int, list_ids: list[int]) -> dict[str, list[str]]:
        """What keeps the account from emailing these lists, by config field (`list_ids` for the
        account's plan, `list_ids.<i>` for a list that is not the account's); empty when nothing does."""
        ...

    def publish(self, session: Session, newsletter: Newsletter) -> Published:
        """Makes the campaign (once per key) in the caller's transaction; raises NewsletterRefused."""
        ...
