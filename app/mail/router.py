"""The email API's router: every feature's routes, in the order path matching needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.mail import (
    contact_routes,
    field_routes,
    form_routes,
    list_routes,
    me_routes,
    suppression_routes,
    tracking_routes,
    webhook_routes,
)
from app.mail.archive import archive_routes
from app.mail.automations import automation_routes
from app.mail.bounces import bounce_routes
from app.mail.campaigns import campaign_routes
from app.mail.hosted_forms import hosted_form_routes

mail_routers: list[APIRouter] = [
    feature.router
    for feature in (
        me_routes,
        contact_routes,
        list_routes,
        campaign_routes,
        automation_routes,
        form_routes,
        field_routes,
        hosted_form_routes,
        suppression_routes,
        tracking_routes,
        archive_routes,
        bounce_routes,
        webhook_routes,
    )
]
mail_router = APIRouter()
for _router in mail_routers:
    mail_router.include_router(_router)
