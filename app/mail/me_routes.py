"""GET /me: the calling user and the account's contact count and limit (allowed on every plan)."""

from __future__ import annotations

from fastapi import APIRouter

from app.identity.dependencies import MailUser
from app.mail.schemas import UserOut

router = APIRouter(tags=["User"])


@router.get("/me", response_model=UserOut, summary="The authenticated user")
async def me(principal: MailUser) -> UserOut:
    # Async: it only reads the principal loaded by the dependency, so it need not take a worker thread.
    user, account = principal.user, principal.account
    return UserOut(
        id=user.id,
        name=user.name,
        email=user.email,
        contacts_count=account.contacts_count,
        contact_limit=account.contact_limit,
        created_at=user.created_at,
        updated_at=user.updated_at,
    )
