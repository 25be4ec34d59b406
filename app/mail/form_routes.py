"""The read-only /forms routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import func, select

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.mail.common import RowId, owned, paginate
from app.mail.form_service import FORMS_PER_PAGE
from app.mail.input import MailInput, validate
from app.mail.schemas import ErrorOut, FormOut, Page
from app.mail.specs import ContactFilter
from app.models import Form

router = APIRouter(tags=["Forms"])


@router.get("/forms", response_model=Page[FormOut], summary="List forms")
def list_forms(
    request: Request, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> dict[str, Any]:
    filters = validate(ContactFilter, raw, status=422)
    query = select(Form).where(Form.account_id == principal.account.id, Form.deleted_at.is_(None))
    if filters.query:
        query = query.where(func.lower(Form.title).like(f"%{filters.query.lower()}%"))
    paged = paginate(session, request, query.order_by(Form.id), FORMS_PER_PAGE)
    return paged.envelope(paged.rows)


@router.get("/forms/{id}", response_model=FormOut, summary="Get a form", responses={404: {"model": ErrorOut}})
def get_form(id: RowId, session: SessionDep, principal: PaidMailUser) -> Form:
    return owned(session, Form, id, principal.account.id, "Form not found.")
