"""The email API's router: every feature's routes, in the order path matching needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.mail import automations, campaigns, contacts, fields, forms, hosted_forms, lists, me, tracking

mail_routers: list[APIRouter] = [
    feature.router
    for feature in (me, contacts, lists, campaigns, automations, forms, fields, hosted_forms, tracking)
]
mail_router = APIRouter()
for _router in mail_routers:
    mail_router.include_router(_router)
