"""Webhook secrecy: what responses show of a webhook's URL and headers, and how an edit that sends the
masked values back keeps the stored ones."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

MASK = "***"


def mask_url(url: str) -> str:
    """`scheme://host[:port]/***`: the path and query (where tokens live) hidden, the host kept so
    the destination stays recognisable. Never raises: an unreadable URL is masked whole."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return MASK
    if not parts.scheme or not host:
        return MASK
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port else host
    return f"{parts.scheme}://{netloc}/{MASK}"


def target_host(url: str) -> str:
    """The destination's host and port, the only part of a webhook URL a delivery shows."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return ""
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def masked_config(config: dict[str, Any]) -> dict[str, Any]:
    """A webhook's config as responses show it."""
    shown = dict(config)
    shown["url"] = mask_url(str(config.get("url", "")))
    shown["headers"] = dict.fromkeys(config.get("headers") or {}, MASK)
    return shown


def restore_secrets(new: dict[str, Any], prior: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """A webhook config with the values left masked taken from `prior` (the same action's stored
    config), and the fields that stay masked with nothing to restore them from.

    The URL is restored only when it is exactly the masked form of the stored one (a real URL that
    happens to end in `/***` is kept); a header value of `***` takes the stored value of that header
    while the URL keeps the stored one's scheme, host and port.
    """
    restored = dict(new)
    unresolved: list[str] = []
    prior_url = str((prior or {}).get("url", ""))
    url = str(new.get("url", ""))
    if prior is not None and url == mask_url(prior_url):
        restored["url"] = prior_url
    elif url.endswith(f"/{MASK}") or url == MASK:
        unresolved.append("url")
    # A stored header value only ever goes where it went before: an edit that points the webhook at
    # another scheme, host or port must send its header values again, or a caller who cannot read them
    # could have them delivered to a host of their choosing.
    same_destination = prior is not None and _origin(str(restored.get("url", ""))) == _origin(prior_url)
    prior_headers: dict[str, str] = dict((prior or {}).get("headers") or {}) if same_destination else {}
    headers: dict[str, str] = {}
    for name, value in (new.get("headers") or {}).items():
        if value == MASK:
            if name in prior_headers:
                headers[name] = prior_headers[name]
            else:
                unresolved.append(f"headers.{name}")
                headers[name] = value
        else:
            headers[name] = value
    restored["headers"] = headers
    return restored, unresolved


def _origin(url: str) -> tuple[str, str, int | None] | None:
    try:
        parts = urlsplit(url)
        return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None


def scrub_secrets(text: str, config: dict[str, Any]) -> str:
    """`text` (an error recorded on a delivery or run, which responses show) with the webhook's secrets
    hidden as responses hide them: the URL in its masked form, its path and query, and header values.

    Error texts are built from exceptions, and some name the URL they were given whole (a blocked
    destination) or echo a header value. Values under four characters are not hidden: they are no
    secret, and replacing them would garble the text (`1` in `HTTP 401`).
    """
    url = str(config.get("url") or "")
    if url:
        text = text.replace(url, mask_url(url))
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is not None:
            rest = parts.path + (f"?{parts.query}" if parts.query else "")
            if len(rest) > 1 and rest != f"/{MASK}":
                text = text.replace(rest, f"/{MASK}")
    for value in (config.get("headers") or {}).values():
        if isinstance(value, str) and len(value) >= 4 and value != MASK:
            text = text.replace(value, MASK)
    return text
