"""Forms: making and listing forms (CLI) with the lists they subscribe to."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.errors import DomainError
from app.kit.pagination import Paging
from app.mail.common import check_list_ids, owned, paginate
from app.mail.specs import ContactFilter
from app.mail.wire import FormOut, Page
from app.models import Form, FormList

FORMS_PER_PAGE = 100


def create_form(session: Session, account_id: int, title: str, list_ids: list[int]) -> Form:
    """A hosted sign-up form subscribing to `list_ids` (each a live list of the account)."""
    title = title.strip()
    if not title or len(title) > 191:
        raise DomainError(400, "A form title is 1 to 191 characters.")
    if not list_ids:
        raise DomainError(400, "A form subscribes to at least one list.")
    list_ids = check_list_ids(session, account_id, list_ids, "lists", 400)
    form = Form(account_id=account_id, title=title)
    session.add(form)
    session.flush()
    for list_id in list_ids:
        session.add(FormList(form_id=form.id, list_id=list_id))
    session.flush()
    return form


def account_forms(session: Session, account_id: int) -> list[tuple[Form, list[int]]]:
    """The account's live forms, oldest first, each with the ids of the lists it subscribes to."""
    forms = list(
        session.scalars(
            select(Form).where(Form.account_id == account_id, Form.deleted_at.is_(None)).order_by(Form.id)
        )
    )
    lists: dict[int, list[int]] = {form.id: [] for form in forms}
    if forms:
        rows = session.execute(
            select(FormList.form_id, FormList.list_id)
            .where(FormList.form_id.in_(list(lists)))
            .order_by(FormList.list_id)
        )
        for form_id, list_id in rows:
            lists[form_id].append(list_id)
    return [(form, lists[form.id]) for form in forms]


def forms_page(
    paging: Paging, session: Session, principal: Principal, filters: ContactFilter
) -> Page[FormOut]:
    """GET /forms: a page of the account's live forms, by title when a query is given."""
    query = select(Form).where(Form.account_id == principal.account.id, Form.deleted_at.is_(None))
    if filters.query:
        query = query.where(func.lower(Form.title).like(f"%{filters.query.lower()}%"))
    paged = paginate(session, paging, query.order_by(Form.id), FORMS_PER_PAGE)
    return paged.as_page([FormOut.model_validate(row) for row in paged.rows])


def find_form(session: Session, principal: Principal, form_id: int) -> Form:
    return owned(session, Form, form_id, principal.account.id, "Form not found.")
