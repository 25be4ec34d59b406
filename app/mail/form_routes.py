"""The read-only /forms routes."""

from __future__ import annotations

from fastapi import APIRouter

from app.identity.dependencies import PaidMailUser
from app.mail import form_service
from app.mail.input import validate
from app.mail.request_input import MailInput, PagingDep, RowId
from app.mail.specs import SEARCH_PARAMETERS, ContactFilter
from app.mail.wire import ErrorOut, FormOut, Page
from app.models import Form
from app.request_sessions import SessionDep

router = APIRouter(tags=["Forms"])


@router.get("/forms", response_model=Page[FormOut], summary="List forms", openapi_extra=SEARCH_PARAMETERS)
def list_forms(
    paging: PagingDep, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> Page[FormOut]:
    filters = validate(ContactFilter, raw, status=422)
    return form_service.forms_page(paging, session, principal, filters)


@router.get("/forms/{id}", response_model=FormOut, summary="Get a form", responses={404: {"model": ErrorOut}})
def get_form(id: RowId, session: SessionDep, principal: PaidMailUser) -> Form:
    return form_service.find_form(session, principal, id)
