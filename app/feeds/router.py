"""The /v1 feed routers, in the order path matching needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.feeds import feed_routes, item_routes, source_routes, telemetry_routes

feed_routers: list[APIRouter] = [
    feed_routes.router,
    source_routes.router,
    item_routes.router,
    telemetry_routes.router,
]
