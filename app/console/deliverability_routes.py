"""The console's Deliverability: per sending domain, the DNS records to publish (SPF, DKIM from the
domain's keys as `tidings dkim create` made them, DMARC), and on demand whether DNS publishes them."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.app_state import SettingsDep, app_state
from app.console.pages import CONSOLE, ConsoleUser
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.kit.time import utcnow
from app.mail.dns_records import DnsRecord, DnsUnreachable, check_records, records_for, sending_domains
from app.mail.stats import DeliverabilityReport, deliverability_report

# The receivers' complaint thresholds for bulk senders (Gmail, Yahoo): stay under 0.1%, never reach 0.3%.
COMPLAINT_WARNING = 0.001
COMPLAINT_NEVER = 0.003

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])


def _records(me: ConsoleUser, check: str) -> tuple[list[tuple[str, list[DnsRecord]]], list[DnsRecord]]:
    domains = sending_domains(me.db, me.account_id, me.user.email)
    return [(domain, records_for(me.db, domain)) for domain in domains], records_for(
        me.db, check
    ) if check else []


def _report(me: ConsoleUser) -> DeliverabilityReport:
    return deliverability_report(me.db, me.account_id, utcnow())


@router.get(CONSOLE + "/deliverability")
async def deliverability_page(
    request: Request, me: ConsoleUser, settings: SettingsDep, check: str = ""
) -> Response:
    """`?check=example.com` asks DNS (the database is read in a worker thread, DNS on the event loop)."""
    errors: list[str] = []
    try:
        domains, to_check = await run_in_threadpool(_records, me, check)
    except DomainError as refused:
        domains, to_check = await run_in_threadpool(_records, me, "")
        errors = [refused.message]
    checks, problem = None, ""
    if to_check:
        try:
            checks = await check_records(to_check, app_state(request).txt_resolver)
        except DnsUnreachable as unreachable:
            problem = (
                f"{unreachable} What to publish is listed below; check again once this server can reach DNS."
            )
    report = await run_in_threadpool(_report, me)
    page = me.page(
        "deliverability.html",
        report=report,
        complaint_warning=COMPLAINT_WARNING * 100,
        complaint_never=COMPLAINT_NEVER * 100,
        bounce_stop=settings.bounce_stop_rate * 100,
        section="deliverability",
        domains=domains,
        check=check,
        checks=checks,
        problem=problem,
        errors=errors,
    )
    return page
