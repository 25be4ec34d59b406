"""GET /contact-fields."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import select

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.mail.common import paginate
from app.mail.field_service import FIELDS_PER_PAGE
from app.mail.schemas import ContactFieldOut, Page
from app.models import ContactField

router = APIRouter(tags=["Contact fields"])


@router.get("/contact-fields", response_model=Page[ContactFieldOut], summary="List custom contact fields")
def list_contact_fields(request: Request, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    query = (
        select(ContactField).where(ContactField.account_id == principal.account.id).order_by(ContactField.id)
    )
    paged = paginate(session, request, query, FIELDS_PER_PAGE)
    return paged.envelope(paged.rows)
