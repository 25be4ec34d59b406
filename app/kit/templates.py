"""The one way to render a server-side HTML page: Jinja2 templates under app/templates, escaped by default."""

from __future__ import annotations

import html
from functools import cache
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup


def escape(value: Any) -> Markup:
    """What every `{{ value }}` goes through. Values marked safe (`Markup`, `tojson`) pass unchanged.

    NUL and lone surrogates cannot be written out as UTF-8 HTML: what a person sent is shown without them.
    `html.escape` rather than Jinja's own escaping keeps the pages' bytes as they were before templates
    (`&#x27;` and `&quot;`, which clients and tests match).
    """
    if hasattr(value, "__html__"):
        return Markup(value.__html__())
    text = "" if value is None else str(value)
    cleaned = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return Markup(html.escape(cleaned, quote=True))


@cache
def environment() -> Environment:
    return Environment(
        loader=PackageLoader("app", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=escape,
        # A name missing from a page's context is a bug to see in tests, not an empty string shown.
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(template: str, /, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def html_page(
    template: str, /, *, status: int = 200, headers: dict[str, str] | None = None, **context: Any
) -> HTMLResponse:
    return HTMLResponse(render(template, **context), status_code=status, headers=headers)
