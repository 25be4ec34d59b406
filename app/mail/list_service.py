"""Contact lists: views with member counts and averages, the in-use check before deletion, and the
CLI's making and listing of an account's lists."""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.errors import Conflict, DomainError, NotFound
from app.kit.pagination import PageAnchors, PageEnvelope, Paging
from app.kit.time import utcnow
from app.mail.common import owned, paginate
from app.mail.contact_listing import contacts_listing, contacts_page
from app.mail.specs import ContactFilter
from app.mail.stats import list_averages
from app.mail.wire import ContactListOut, ListUsage, Page, row_wire
from app.models import Automation, AutomationTrigger, Contact, ContactList, Form, FormList, ListMembership

LISTS_PER_PAGE = 100


def lists_wire(session: Session, lists: list[ContactList]) -> list[ContactListOut]:
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
        row_wire(
            ContactListOut,
            item,
            contact_count=counts.get(item.id, 0),
            average_email_open_percent=averages.get(item.id, (0.0, 0.0))[0],
            average_email_click_percent=averages.get(item.id, (0.0, 0.0))[1],
        )
        for item in lists
    ]


def make_list(session: Session, account_id: int, user_id: int, name: str) -> ContactListOut:
    """A new list of the account (the CLI; the API's route checks the name with its own schema)."""
    name = name.strip()
    if not name or len(name) > 191:
        raise DomainError(400, "A list name is 1 to 191 characters.")
    return add_list(session, account_id, user_id, name)


def account_lists(session: Session, account_id: int) -> list[ContactListOut]:
    """The account's live lists with their counts, oldest first."""
    lists = session.scalars(
        select(ContactList)
        .where(ContactList.account_id == account_id, ContactList.deleted_at.is_(None))
        .order_by(ContactList.id)
    )
    return lists_wire(session, list(lists))


def list_usages(session: Session, list_id: int) -> list[ListUsage]:
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
        *(ListUsage(type="form", id=form_id, title=title) for form_id, title in forms),
        *(
            ListUsage(type="automation", id=automation_id, title=title)
            for automation_id, title in automations
        ),
    ]


def find_list(session: Session, principal: Principal, list_id: int) -> ContactList:
    return owned(session, ContactList, list_id, principal.account.id, "List not found.")


def lists_page(
    paging: Paging, session: Session, principal: Principal, filters: ContactFilter
) -> Page[ContactListOut]:
    """GET /lists: a page of the account's live lists, by name when a query is given."""
    query = select(ContactList).where(
        ContactList.account_id == principal.account.id, ContactList.deleted_at.is_(None)
    )
    if filters.query:
        query = query.where(func.lower(ContactList.name).like(f"%{filters.query.lower()}%"))
    paged = paginate(session, paging, query.order_by(ContactList.id), LISTS_PER_PAGE)
    return paged.as_page(lists_wire(session, paged.rows))


def add_list(session: Session, account_id: int, user_id: int, name: str) -> ContactListOut:
    """A new list of the account, as its view."""
    contact_list = ContactList(account_id=account_id, user_id=user_id, name=name)
    session.add(contact_list)
    session.flush()
    return lists_wire(session, [contact_list])[0]


def rename_list(session: Session, contact_list: ContactList, name: str) -> None:
    """A new name for the list (checked as a new list's name is, by ListCreate)."""
    contact_list.name = name
    contact_list.updated_at = utcnow()
    session.flush()


def delete_list(session: Session, contact_list: ContactList) -> None:
    """Soft delete; 409 while the list is in use (list_usages)."""
    usages = list_usages(session, contact_list.id)
    if usages:
        raise Conflict(
            "The list is in use and cannot be deleted.",
            code="list_in_use",
            extra={"usages": [usage.model_dump() for usage in usages]},
        )
    contact_list.deleted_at = utcnow()
    session.flush()


def list_contacts(
    session: Session,
    paging: Paging,
    anchors: PageAnchors,
    principal: Principal,
    list_id: int,
    filters: ContactFilter,
) -> PageEnvelope:
    """GET /lists/{id}/contacts: a page of the list's live contacts."""
    listing = contacts_listing(principal.account, ContactFilter(query=filters.query), list_id=list_id)
    return contacts_page(session, paging, listing, anchors)


def remove_from_list(session: Session, principal: Principal, list_id: int, contact_id: int) -> Contact:
    """The contact leaves the list; 404 when it was not on it."""
    contact = owned(session, Contact, contact_id, principal.account.id, "Contact not found.")
    removed = session.execute(
        delete(ListMembership).where(
            ListMembership.list_id == list_id, ListMembership.contact_id == contact_id
        )
    )
    if not removed.rowcount:  # type: ignore[attr-defined]
        raise NotFound("Contact is not in this list.")
    return contact
