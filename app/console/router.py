"""The console's routes, in the order the app includes them, and its sign-in redirect."""

from __future__ import annotations

from fastapi import FastAPI

from app.console import (
    automation_routes,
    campaign_routes,
    contact_routes,
    deliverability_routes,
    draft_routes,
    feed_routes,
    form_routes,
    home_routes,
    import_routes,
    list_routes,
    newsletter_routes,
    settings_routes,
    shell_routes,
    suppression_routes,
    watch_routes,
    webhook_routes,
)
from app.console.pages import SignInRequired, sign_in_redirect

console_routers = (
    shell_routes.router,
    home_routes.router,
    campaign_routes.router,
    import_routes.router,  # before the contact pages: /contacts/import is no contact id
    contact_routes.router,
    list_routes.router,
    suppression_routes.router,
    form_routes.router,
    automation_routes.router,
    feed_routes.router,
    watch_routes.router,
    draft_routes.router,
    newsletter_routes.router,
    webhook_routes.router,
    settings_routes.router,
    deliverability_routes.router,
)


def install_console(app: FastAPI) -> None:
    for router in console_routers:
        app.include_router(router)
    app.add_exception_handler(SignInRequired, sign_in_redirect)
