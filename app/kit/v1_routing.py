"""The /v1 router: every route answers with and without a trailing slash (docs/compatibility.md), and only the
slashless path is described in the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter


class V1Router(APIRouter):
    def add_api_route(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().add_api_route(path, endpoint, **kwargs)
        twin = path[:-1] if path.endswith("/") else f"{path}/"
        hidden = {**kwargs, "include_in_schema": False}
        hidden.pop("operation_id", None)
        super().add_api_route(twin, endpoint, **hidden)
