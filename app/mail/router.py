"""The email API's router: every feature's routes, in the order path matching needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.mail import (
    archive_routes,
    automation_routes,
    bounce_routes,
    campaign_routes,
    contact_routes,
    field_routes,
    form_routes,
    hosted_form_routes,
    list_routes,
    me_routes,
    suppression_routes,
    tracking_routes,
    webhook_routes,
)

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
