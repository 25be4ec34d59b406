"""The campaign editor's body made into the html a campaign stores: written in Markdown (markdown-it-py,
the CommonMark reference parser for Python) or pasted as html; a template's <style> rules inlined into
the elements' style attributes (css-inline: most mail clients drop a <style> block), then sanitized
(nh3, the bindings of the Rust `ammonia` sanitizer), so that what was pasted from a web page keeps its
text, links, images, tables and inline styles and loses scripts, forms, frames and event handlers.

Merge tags (`{{ first_name | "friend" }}`, `{{ unsubscribe_url }}` in an href) go through unchanged:
they are text to all three, and a relative URL is passed through by the sanitizer.
"""

from __future__ import annotations

import contextlib
from typing import Literal

import css_inline
import nh3
from markdown_it import MarkdownIt

BodyFormat = Literal["html", "markdown"]
BODY_FORMATS: tuple[BodyFormat, ...] = ("html", "markdown")

# Markdown may hold html (a button, a table): it is sanitized with the rest.
MARKDOWN = MarkdownIt("commonmark", {"html": True})
# Never fetches a stylesheet a <link> names: the editor's server makes no outside request.
INLINER = css_inline.CSSInliner(load_remote_stylesheets=False, keep_style_tags=False, keep_link_tags=False)

# What email html uses beyond the sanitizer's defaults: <font>, and the layout attributes of tables.
EMAIL_TAGS = nh3.ALLOWED_TAGS | {"font"}
LAYOUT = {"style", "align", "valign", "width", "height", "bgcolor", "dir", "lang", "title"}
EMAIL_ATTRIBUTES: dict[str, set[str]] = {
    "*": LAYOUT,
    "a": {"href", "name", "target"},
    "img": {"src", "alt", "border"},
    "table": {"border", "cellpadding", "cellspacing", "role"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "col": {"span"},
    "font": {"color", "face", "size"},
}
URL_SCHEMES = {"http", "https", "mailto", "tel"}


def email_html(source: str, body_format: BodyFormat) -> str:
    """The html to store for what the editor holds in `body_format`."""
    html = MARKDOWN.render(source) if body_format == "markdown" else source
    if "<style" in html.lower():
        # CSS it cannot read stays out of the elements (the sanitizer drops the block).
        with contextlib.suppress(css_inline.InlineError, ValueError):
            html = INLINER.inline(html)
    return nh3.clean(
        html,
        tags=EMAIL_TAGS,
        attributes=EMAIL_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel=None,
        strip_comments=True,
    )
