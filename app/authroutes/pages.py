"""The small HTML pages of the account and OAuth flows: one plain layout, forms that work without
JavaScript, labels on every field, and every value escaped."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from app.models import User

STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1a1a1a; background: #f6f6f4; }
main { max-width: 34rem; margin: 3rem auto; padding: 2rem; background: #fff; border-radius: 8px;
       box-shadow: 0 1px 3px rgba(0,0,0,.15); }
h1 { font-size: 1.5rem; margin-top: 0; }
label { display: block; margin: 1rem 0 .25rem; font-weight: 600; }
input[type=text], input[type=password] { width: 100%; box-sizing: border-box; padding: .5rem;
       font: inherit; border: 1px solid #767676; border-radius: 4px; }
button { font: inherit; padding: .5rem 1.25rem; margin: 1rem .5rem 0 0; border-radius: 4px;
       border: 1px solid #1d4ed8; background: #1d4ed8; color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: #1d4ed8; }
button:focus-visible, input:focus-visible, a:focus-visible {
       outline: 3px solid #f59e0b; outline-offset: 2px; }
[role=alert] { padding: .75rem; border-radius: 4px; background: #fdecea; color: #8a1c12; }
.token { font-family: ui-monospace, monospace; word-break: break-all; padding: .75rem;
       background: #eef6ee; border-radius: 4px; }
table { width: 100%; border-collapse: collapse; margin-top: 1rem; }
th, td { text-align: left; padding: .4rem .3rem; border-bottom: 1px solid #ddd; vertical-align: middle; }
td form button { margin: 0; padding: .25rem .75rem; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
.signed-in { color: #555; font-size: .9rem; margin-bottom: 1rem; }
.signed-in form { display: inline; }
.signed-in button { margin: 0; padding: 0; border: 0; background: none; color: #1d4ed8;
       text-decoration: underline; }
"""


def page(title: str, body: str, *, status: int = 200) -> HTMLResponse:
    document = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · Tidings</title><style>{STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>"
    )
    # Never framed (clickjacking on the consent page) and never cached (tokens are shown once).
    headers = {
        "Cache-Control": "no-store",
        "X-Frame-Options": "DENY",
        # No form-action: browsers apply it to the redirect that follows the consent form, which goes
        # to the client's own site.
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        "Referrer-Policy": "same-origin",
    }
    return HTMLResponse(document, status_code=status, headers=headers)


def redirect(location: str, status: int = 303) -> RedirectResponse:
    return RedirectResponse(location, status_code=status, headers={"Cache-Control": "no-store"})


def with_cookies(target: Response, source: Response) -> Response:
    """Copy the Set-Cookie headers a dependency put on the injected response (a refreshed or cleared
    session cookie): FastAPI adds them to returned values only, not to a Response the route built."""
    for name, value in source.raw_headers:
        if name == b"set-cookie":
            target.raw_headers.append((name, value))
    return target


def local_path(candidate: str | None, default: str = "/account/tokens") -> str:
    """`candidate` if it is a path on this service, else `default`: never an open redirect."""
    if (
        not candidate
        or not candidate.startswith("/")
        or candidate.startswith(("//", "/\\"))
        or any(ord(c) < 0x20 or c == "\x7f" for c in candidate)
    ):
        return default
    return candidate


def this_path(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def sign_in_url(next_path: str) -> str:
    return "/account/sign-in?" + urlencode({"next": next_path})


def user_label(user: User) -> str:
    return user.display_username or user.username or user.email


def signed_in_line(user: User) -> str:
    return (
        # A div: a form cannot sit inside a paragraph.
        f'<div class="signed-in">Signed in as <strong>{escape(user_label(user))}</strong>. '
        '<form method="post" action="/account/sign-out"><button type="submit">Sign out</button></form></div>'
    )


def sign_in_form(
    next_path: str, *, heading: str, intro: str = "", error: str = "", username: str = ""
) -> str:
    alert = f'<p role="alert">{escape(error)}</p>' if error else ""
    return (
        f"<h1>{escape(heading)}</h1>{intro}{alert}"
        '<form method="post" action="/account/sign-in">'
        f'<input type="hidden" name="next" value="{escape(next_path)}">'
        '<label for="username">Username</label>'
        f'<input type="text" id="username" name="username" value="{escape(username)}" required '
        'autocomplete="username" autocapitalize="none" spellcheck="false" maxlength="30">'
        '<label for="password">Password</label>'
        '<input type="password" id="password" name="password" required autocomplete="current-password">'
        '<button type="submit">Sign in</button></form>'
    )
