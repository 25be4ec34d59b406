"""email (beyond openmagpie): the item (instant) or a window of items (digest) becomes a campaign of the
email API, sent to the configured lists or left as a draft. The campaign is made by the email domain's
own service (app/mail/newsletter_service.py, reached through the desk the scheduler wires in), so it
goes out through the same fan-out, suppression, tracking and stats as any campaign; the run's result
names it. A watch's earlier actions gate as they do for a webhook: only items that passed them get here.

`min_interval_seconds` is kept by the run queue (app/watches/run_queue.py): runs that come within it of
the action's last campaign wait, not counting an attempt, and go together in the next one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from app.kit.newsletters import Newsletter, NewsletterRefused
from app.models import ActionKind, RunState
from app.watches.actions.base import (
    Action,
    ActionContext,
    ActionRules,
    Performed,
    Prepared,
    payload_items,
)
from app.watches.newsletter_template import render
from app.watches.run_queue import ClaimedRun, Outcome
from app.watches.specs import EmailConfig
from app.watches.summaries import cadence_phrase


def campaign_key(runs: list[ClaimedRun]) -> str:
    """The same for every attempt at the same runs (the email API makes one campaign per key)."""
    return hashlib.sha256(",".join(sorted(run.run_id for run in runs)).encode()).hexdigest()


def newsletter(runs: list[ClaimedRun], items: list[dict[str, Any]]) -> Newsletter:
    config, first = runs[0].config, runs[0]
    rendered = render(
        template=config.get("template"),
        subject=config.get("subject"),
        watch_name=first.watch_name,
        items=items,
    )
    return Newsletter(
        account_id=first.account_id,
        list_ids=[int(list_id) for list_id in config["list_ids"]],
        title=rendered.subject
        if first.watch_name in rendered.subject
        else f"{first.watch_name}: {rendered.subject}",
        subject=rendered.subject,
        html=rendered.html,
        from_name=config.get("from_name"),
        from_email=config.get("from_email"),
        mode="draft" if config.get("mode") == "draft" else "send",
        key=campaign_key(runs),
    )


async def perform(ctx: ActionContext, runs: list[ClaimedRun]) -> list[Outcome]:
    # The items as a webhook body carries them (the config has no include_fields: every field).
    found = payload_items(runs)
    outcomes, good = found.errored, found.runs
    items = [payload["item"] for payload in found.items]
    if not good:
        return outcomes
    if ctx.publish is None:
        error = "this process has no email API wired in to make campaigns"
        return outcomes + [Outcome(run, RunState.ERRORED, error=error) for run in good]
    letter = newsletter(good, items)
    try:
        published = await ctx.publish(letter)
    except NewsletterRefused as exc:
        return outcomes + [Outcome(run, RunState.ERRORED, error=str(exc)) for run in good]
    result = {
        "campaign_id": published.campaign_id,
        "mode": letter.mode,
        "scheduled": published.scheduled,
        "item_count": len(good),
    }
    return outcomes + [Outcome(run, RunState.SUCCEEDED, result=result) for run in good]


class EmailAction(Action):
    kind = ActionKind.EMAIL
    config_model = EmailConfig

    def describe(self, config: dict[str, Any]) -> str:
        lists = ", ".join(str(list_id) for list_id in config.get("list_ids") or [])
        verb = "drafts a campaign for" if config.get("mode") == "draft" else "emails"
        interval = int(config.get("min_interval_seconds") or 0)
        spacing = f", at most one campaign per {interval} s" if interval else ""
        return f"{verb} lists {lists} ({cadence_phrase(config)}{spacing})"

    def checked(
        self, config: dict[str, Any], prior: dict[str, Any] | None, rules: ActionRules
    ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The lists must be the account's, and the account's plan must allow the email API."""
        return config, rules.newsletter_problems([int(list_id) for list_id in config["list_ids"]])

    async def perform(
        self, ctx: ActionContext, prepared: Prepared, clock: Callable[[], datetime]
    ) -> Performed:
        return await perform(ctx, prepared.runs), None
