"""The console's frame: /console (the first section) and its assets, cached for a year under a URL that
carries their hash (a new release is a new URL)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.console.pages import ASSET_TYPES, ASSETS, CONSOLE, SECTIONS, ConsoleUser, asset
from app.kit.errors import NotFound

router = APIRouter(include_in_schema=False)


@router.get(CONSOLE)
def console_home(me: ConsoleUser) -> Response:
    return me.redirect(SECTIONS[0].path)


@router.get(ASSETS + "/{name}")
def console_asset(name: str) -> Response:
    if name not in ASSET_TYPES:
        raise NotFound("No such asset.")
    data, digest = asset(name)
    headers = {
        "Cache-Control": "public, max-age=31536000, immutable",
        "ETag": f'"{digest}"',
        "X-Content-Type-Options": "nosniff",
    }
    return Response(data, media_type=ASSET_TYPES[name], headers=headers)
