"""The email API's router: every feature's routes, in the order path matching needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.mail import automations, campaigns, contacts, fields, forms, lists, me

mail_router = APIRouter()
for feature in (me, contacts, lists, campaigns, automations, forms, fields):
    mail_router.include_router(feature.router)
