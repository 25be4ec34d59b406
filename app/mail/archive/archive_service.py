"""An account's public archive: its sent campaigns that opted in, as public pages and an Atom feed.

Off unless the account turns it on (`public_archive` of PATCH /me), and then only the campaigns that
opted in (their own `public_archive`), once sent, neither deleted nor automation emails. It is found
by the id GET /me shows (the account's user), so one address names it for good.

An archived copy carries no reader's data: it is the campaign filled for a reader without names (each
merge tag shows its fallback, `{{ email }}` nothing), compiled without the open pixel; its links are
the signed redirects of a preview, which go where they should and count nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from app.mail.archive.web_version_service import web_page
from app.mail.campaigns.campaign_preview_service import UNTRACKED, MailContext
from app.mail.sending.render import Recipient, compile_stored, fill_parts, with_fallbacks
from app.models import Account, Campaign, User

# The newest campaigns an archive lists (the page and the feed alike).
ARCHIVE_LENGTH = 100
READER_WITHOUT_NAMES = Recipient(UNTRACKED, "", None, None, {})


@dataclass(frozen=True, slots=True)
class ArchivedCampaign:
    id: int
    subject: str
    from_name: str
    sent_at: datetime


@dataclass(frozen=True, slots=True)
class Archive:
    user_id: int
    name: str
    campaigns: list[ArchivedCampaign]


def _archive_account(session: Session, user_id: int) -> tuple[int, str] | None:
    """The account and its user's name when its archive is on."""
    row = session.execute(
        select(Account.id, User.name)
        .join(User, User.account_id == Account.id)
        .where(User.id == user_id, Account.public_archive.is_(True))
    ).first()
    return (row.id, row.name) if row is not None else None


def _archived(account_id: int) -> list[ColumnElement[bool]]:
    return [
        Campaign.account_id == account_id,
        Campaign.public_archive.is_(True),
        Campaign.sent_at.is_not(None),
        Campaign.deleted_at.is_(None),
        Campaign.automation_id.is_(None),
    ]


def archive(session: Session, user_id: int) -> Archive | None:
    """The archive's newest campaigns, their subjects filled for a reader without names; None when
    there is no such archive."""
    found = _archive_account(session, user_id)
    if found is None:
        return None
    account_id, name = found
    campaigns = session.scalars(
        select(Campaign).where(*_archived(account_id)).order_by(Campaign.sent_at.desc()).limit(ARCHIVE_LENGTH)
    ).all()
    listed = []
    for campaign in campaigns:
        if campaign.sent_at is None:  # the query wants it set; for the type checker
            continue
        subject = with_fallbacks(campaign.subject)
        listed.append(ArchivedCampaign(campaign.id, subject, campaign.from_name, campaign.sent_at))
    return Archive(user_id, name, listed)


def archived_email(session: Session, user_id: int, campaign_id: int, context: MailContext) -> str | None:
    """The archived copy's html; None when the archive or the campaign is not there."""
    found = _archive_account(session, user_id)
    if found is None:
        return None
    campaign = session.scalars(
        select(Campaign).where(Campaign.id == campaign_id, *_archived(found[0]))
    ).first()
    if campaign is None:
        return None
    compiled = compile_stored(campaign, account_tracks_opens=False)
    return web_page(fill_parts(compiled, READER_WITHOUT_NAMES, context.tokens, context.base_url))
