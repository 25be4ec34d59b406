"""GET /contact-fields."""

from __future__ import annotations

from fastapi import APIRouter

from app.identity.dependencies import PaidMailUser
from app.mail import field_service
from app.mail.request_input import PagingDep
from app.mail.wire import ContactFieldOut, Page
from app.request_sessions import SessionDep

router = APIRouter(tags=["Contact fields"])


@router.get("/contact-fields", response_model=Page[ContactFieldOut], summary="List custom contact fields")
def list_contact_fields(
    paging: PagingDep, session: SessionDep, principal: PaidMailUser
) -> Page[ContactFieldOut]:
    return field_service.fields_page(paging, session, principal)
