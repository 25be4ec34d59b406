"""The /v1 feed routers, in the order path matching needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.feeds import feeds, items, telemetry

feed_routers: list[APIRouter] = [feeds.router, items.router, telemetry.router]
