"""The email domain's side of a watch's `email` action (app/kit/newsletters.py): whether an account may
email its lists, and the campaign a watch's items become. The campaign is a regular one, made and sent
by the same rules as `POST /campaigns` and `POST /campaigns/{id}/send`, so it goes out through the same
fan-out, suppression, tracking and stats, and `GET /campaigns/{id}` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.principal import Principal, principal_of
from app.kit.errors import Forbidden, ValidationFailed
from app.kit.newsletters import Newsletter, NewsletterRefused, Published
from app.mail.campaigns import campaign_service
from app.mail.campaigns.campaign_check import SigningPolicy, refuse_serious_findings
from app.mail.campaigns.campaign_rules import MAX_SHORT
from app.mail.common import live_list_ids_among
from app.mail.specs import CampaignCreate
from app.models import PAID_PLANS, Account, Campaign, User

PLAN_REFUSAL = "The email action needs a paid plan (lifetime or empire), as the email API does."


@dataclass(frozen=True)
class MailNewsletters:
    """The `NewsletterDesk` the app and the scheduler hand to the watch domain. `signing` is the
    operator's signing policy, for the check before send that a campaign sent by hand passes too."""

    signing: SigningPolicy = field(default_factory=SigningPolicy)

    def problems(self, session: Session, account_id: int, list_ids: list[int]) -> dict[str, list[str]]:
        account = session.get(Account, account_id)
        if account is None or account.plan not in PAID_PLANS:
            return {"list_ids": [PLAN_REFUSAL]}
        found = live_list_ids_among(session, account_id, list_ids)
        return {
            f"list_ids.{index}": [f"No list {list_id} in this account's email API lists."]
            for index, list_id in enumerate(list_ids)
            if list_id not in found
        }

    def publish(self, session: Session, newsletter: Newsletter) -> Published:
        made = session.scalar(select(Campaign).where(Campaign.source_key == newsletter.key))
        if made is not None:
            # An earlier attempt at the same runs made it and died before recording them.
            return Published(made.id, made.scheduled_at is not None)
        principal = _principal(session, newsletter.account_id)
        if principal.account.plan not in PAID_PLANS:
            raise NewsletterRefused(PLAN_REFUSAL)
        list_ids = sorted(live_list_ids_among(session, newsletter.account_id, newsletter.list_ids))
        if not list_ids:
            raise NewsletterRefused("None of the action's lists exists any more in the email API.")
        try:
            body = CampaignCreate(
                title=newsletter.title[:MAX_SHORT],
                subject=newsletter.subject[:MAX_SHORT],
                html=newsletter.html,
                from_name=(newsletter.from_name or principal.user.name or principal.user.email)[:MAX_SHORT],
                from_email=newsletter.from_email or principal.user.email,
                lists=list_ids,
            )
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise NewsletterRefused(f"The campaign would be invalid ({problems}).") from exc
        view = campaign_service.create_campaign(session, principal, body)
        campaign = session.get_one(Campaign, view.id)
        campaign.source_key = newsletter.key
        session.flush()
        if newsletter.mode == "draft":
            return Published(campaign.id, False)
        try:
            refuse_serious_findings(session, principal.account.id, campaign, self.signing)
            campaign_service.send_campaign(session, principal, campaign)
        except (Forbidden, ValidationFailed):
            # Warming up, or a serious finding of the check before send (an unsigned From domain under
            # production, a link no reader can open): the campaign stays a draft, where a person sees
            # why (GET /campaigns/{id}/check, the console) and sends it once it is fixed.
            return Published(campaign.id, False)
        return Published(campaign.id, True)


def _principal(session: Session, account_id: int) -> Principal:
    """The account acting, as its first user (whose name and address a campaign is from by default)."""
    account = session.get(Account, account_id)
    user = session.scalar(select(User).where(User.account_id == account_id).order_by(User.id).limit(1))
    if account is None or user is None:
        raise NewsletterRefused("The account has no user to send as.")
    return principal_of(user, account)
