"""The /v1 watch routers, in the order path matching needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.watches import action_routes, activity_routes, backfill_routes, engine_routes, watch_routes

watch_routers: list[APIRouter] = [
    watch_routes.router,
    action_routes.router,
    activity_routes.router,
    backfill_routes.router,
    engine_routes.router,
]
