"""The "view in browser" page (GET /w/{token}): the email's html as its reader got it.

The token (sending/tokens.py) signs the email's deliverable id and its campaign; a forged or altered
one reads as nothing and the route answers 404. The page is the campaign compiled and filled for that
reader by the send path's own `fill_parts` (render.py): merge tags with the reader's values, the same
signed links (so a click from the page counts as a click of the email), the open pixel, the
unsubscribe link. A preview's or test email's token names no email (UNTRACKED): its page shows the
campaign to a reader without names (the merge tags' fallbacks), counting nothing, as its links do.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.mail.campaigns.campaign_preview_service import UNTRACKED, MailContext
from app.mail.sending.queue import custom_fields_of
from app.mail.sending.render import Recipient, compile_stored, fill_parts
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
    return fill_parts(compiled, recipient, context.tokens, context.base_url).html
