"""Contact lists: views with member counts and averages, the in-use check before deletion, and the
CLI's making and listing of an account's lists."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.kit.errors import DomainError
from app.mail.stats import list_averages
from app.models import Automation, AutomationTrigger, Contact, ContactList, Form, FormList, ListMembership

LISTS_PER_PAGE = 100


def list_views(session: Session, lists: list[ContactList]) -> list[dict[str, Any]]:
    """Lists with their live member counts and open and click averages, in two queries for any number."""
    ids = [item.id for item in lists]
    counts = (
        dict(
            session.execute(
                select(ListMembership.list_id, func.count())
                .join(Contact, Contact.id == ListMembership.contact_id)
                .where(ListMembership.list_id.in_(ids), Contact.deleted_at.is_(None))
                .group_by(ListMembership.list_id)
            ).all()
        )
        if ids
        else {}
    )
    averages = list_averages(session, ids)
    return [
        {
            "id": item.id,
            "name": item.name,
            "user_id": item.user_id,
            "contact_count": counts.get(item.id, 0),
            "average_email_open_percent": averages.get(item.id, (0.0, 0.0))[0],
            "average_email_click_percent": averages.get(item.id, (0.0, 0.0))[1],
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }
        for item in lists
    ]


def make_list(session: Session, account_id: int, user_id: int, name: str) -> dict[str, Any]:
    """A new list of the account (the CLI; the API's route checks the name with its own schema)."""
    name = name.strip()
    if not name or len(name) > 191:
        raise DomainError(400, "A list name is 1 to 191 characters.")
    contact_list = ContactList(account_id=account_id, user_id=user_id, name=name)
    session.add(contact_list)
    session.flush()
    return list_views(session, [contact_list])[0]


def account_lists(session: Session, account_id: int) -> list[dict[str, Any]]:
    """The account's live lists with their counts, oldest first."""
    lists = session.scalars(
        select(ContactList)
        .where(ContactList.account_id == account_id, ContactList.deleted_at.is_(None))
        .order_by(ContactList.id)
    )
    return list_views(session, list(lists))


def list_usages(session: Session, list_id: int) -> list[dict[str, Any]]:
    forms = session.execute(
        select(Form.id, Form.title)
        .join(FormList, FormList.form_id == Form.id)
        .where(FormList.list_id == list_id, Form.deleted_at.is_(None))
    ).all()
    automations = session.execute(
        select(Automation.id, Automation.title)
        .join(AutomationTrigger, AutomationTrigger.automation_id == Automation.id)
        .where(AutomationTrigger.list_id == list_id, Automation.deleted_at.is_(None))
    ).all()
    return [
        *({"type": "form", "id": form_id, "title": title} for form_id, title in forms),
        *(
            {"type": "automation", "id": automation_id, "title": title}
            for automation_id, title in automations
        ),
    ]
