"""What the public pages of campaigns share (the "view in browser" page, the public archive): their
headers and their 429 page. Not a route module, so that both route modules may import it."""

from __future__ import annotations

from fastapi.responses import HTMLResponse

from app.kit.templates import html_page

# The web version is the campaign's own html: its images and styles may come from anywhere, nothing
# else runs (no script, no form, no frame).
WEB_VERSION_HEADERS = {
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; img-src * data:; style-src * 'unsafe-inline'; "
    "font-src *; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
}
TOO_MANY_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
}


def too_many_page(retry_after: int) -> HTMLResponse:
    """Past TIDINGS_PUBLIC_PAGE_RATE_LIMIT for this client address."""
    return html_page(
        "unsubscribe/too_many.html",
        status=429,
        headers={**TOO_MANY_HEADERS, "Retry-After": str(retry_after)},
        retry_after=retry_after,
    )
