"""The "view in browser" page (GET /w/{token}): the email's html as its reader got it.

The token (sending/tokens.py) signs the email's deliverable id and its campaign; a forged or altered
one reads as nothing and the route answers 404. The page is the campaign compiled and filled for that
reader by the send path's own `fill_parts` (render.py): merge tags with the reader's values, the same
signed links (so a click from the page counts as a click of the email), the open pixel, the
unsubscribe link. A preview's or test email's token names no email (UNTRACKED): its page shows the
campaign to a reader without names (the merge tags' fallbacks), counting nothing, as its links do.
"""

from __future__ import annotations

import html
import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.mail.campaigns.campaign_preview_service import UNTRACKED, MailContext
from app.mail.sending.queue import custom_fields_of
from app.mail.sending.render import Filled, Recipient, compile_stored, fill_parts
from app.models import Account, Campaign, Contact, Deliverable


def web_version_html(
    session: Session, deliverable_id: int, campaign_id: int, context: MailContext
) -> str | None:
    """The email's html for its reader; None when there is no such sent email (or, for an untracked
    token, no such live campaign)."""
    campaign = session.get(Campaign, campaign_id)
    if campaign is None or campaign.deleted_at is not None:
        return None
    if deliverable_id == UNTRACKED:
        recipient = Recipient(UNTRACKED, "", None, None, {})
    else:
        row = session.execute(
            select(Contact.id, Contact.email, Contact.first_name, Contact.last_name)
            .join(Deliverable, Deliverable.contact_id == Contact.id)
            .where(
                Deliverable.id == deliverable_id,
                Deliverable.campaign_id == campaign_id,
                Deliverable.sent_at.is_not(None),
            )
        ).first()
        if row is None:
            return None
        fields = custom_fields_of(session, [row.id]).get(row.id, {})
        recipient = Recipient(deliverable_id, row.email, row.first_name, row.last_name, fields)
    tracks_opens = session.scalar(select(Account.track_opens).where(Account.id == campaign.account_id))
    compiled = compile_stored(campaign, account_tracks_opens=bool(tracks_opens))
    return web_page(fill_parts(compiled, recipient, context.tokens, context.base_url))


HTML_TAG = re.compile(r"<html\b[^>]*>", re.IGNORECASE)
HEAD_TAG = re.compile(r"<head\b[^>]*>", re.IGNORECASE)
HAS_TITLE = re.compile(r"<title\b", re.IGNORECASE)
HAS_LANG = re.compile(r"\blang\s*=", re.IGNORECASE)
# A campaign names no language: a page that does not say its own is read as English (the console's).
DEFAULT_LANG = "en"


def web_page(filled: Filled) -> str:
    """The filled email as a page of its own: an email's html is often a fragment, and a page needs a
    language and a title (the subject) for a screen reader and a browser's tab. A whole document keeps
    what it says and gets only what it lacks."""
    title = f"<title>{html.escape(filled.subject, quote=False)}</title>"
    body = filled.html
    opening = HTML_TAG.search(body)
    if opening is None:
        return (
            f'<!DOCTYPE html><html lang="{DEFAULT_LANG}"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"{title}</head><body>{body}</body></html>"
        )
    if not HAS_TITLE.search(body):
        head = HEAD_TAG.search(body, opening.end())
        at = head.end() if head is not None else opening.end()
        body = body[:at] + (title if head is not None else f"<head>{title}</head>") + body[at:]
    if not HAS_LANG.search(opening.group(0)):
        tag = opening.group(0)
        body = body[: opening.start()] + f'{tag[:-1]} lang="{DEFAULT_LANG}">' + body[opening.end() :]
    return body
