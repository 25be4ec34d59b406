"""The calling user as GET /me shows them, and the account's preferences that PATCH /me changes."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.time import utcnow
from app.mail.specs import AccountPreferences
from app.mail.wire import UserOut
from app.models import Account


def me_wire(
    principal: Principal, *, track_opens: bool | None = None, public_archive: bool | None = None
) -> UserOut:
    user, account = principal.user, principal.account
    return UserOut(
        id=user.id,
        name=user.name,
        email=user.email,
        contacts_count=account.contacts_count,
        contact_limit=account.contact_limit,
        created_at=user.created_at,
        updated_at=user.updated_at,
        track_opens=account.track_opens if track_opens is None else track_opens,
        public_archive=account.public_archive if public_archive is None else public_archive,
    )


def update_preferences(session: Session, principal: Principal, body: AccountPreferences) -> UserOut:
    """PATCH /me: the account's open-pixel switch (off: no email of the account carries the pixel; the
    send workers see it at their next batch, as they see an edited campaign) and its public archive."""
    given = {
        name: value
        for name, value in (("track_opens", body.track_opens), ("public_archive", body.public_archive))
        if value is not None
    }
    if given:
        session.execute(
            update(Account).where(Account.id == principal.account.id).values(**given, updated_at=utcnow())
        )
    return me_wire(principal, track_opens=body.track_opens, public_archive=body.public_archive)
