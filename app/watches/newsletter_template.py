"""The subject and html of the campaign a watch's `email` action makes from its items.

The template language is deliberately tiny, because the html also carries the email API's merge tags
(`{{ first_name | "friend" }}`, `{{ unsubscribe_url }}`), which are filled per contact when the campaign
is sent, and which a general template engine would consume or refuse (Jinja reads `| "friend"` as a
syntax error). What this module fills, and nothing else:

- `{{ item.NAME }}`: a field of the item, as the webhook payload's `item` shows it (`title`, `content`,
  `author`, ...), plus `url` (the item's link) and `summary` (its content cut to about 300 characters);
  an unknown field is empty. Outside a loop it is the first item.
- `{{ count }}`: how many items the campaign carries; `{{ watch.name }}`: the watch's name.
- `{% for item in items %} ... {% endfor %}`: the part between, once per item (not nested).

Values are HTML-escaped in the html, and their braces are written as character references there, so
an item's text can never form a merge tag. Anything else in double braces is left for the send.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LOOP = re.compile(r"\{%\s*for\s+item\s+in\s+items\s*%\}(.*?)\{%\s*endfor\s*%\}", re.DOTALL)
STATEMENT = re.compile(r"\{%.*?%\}", re.DOTALL)
VALUE = re.compile(r"\{\{\s*(item\.[A-Za-z_][A-Za-z0-9_]*|count|watch\.name)\s*\}\}")
SPACES = re.compile(r"\s+")
SUMMARY_LENGTH = 300

DEFAULT_TEMPLATE = """\
<!doctype html>
<html><body style="font-family: sans-serif; max-width: 640px; margin: 0 auto; padding: 16px">
{% for item in items %}
<h2 style="font-size: 18px; margin: 24px 0 4px"><a href="{{ item.url }}">{{ item.title }}</a></h2>
<p style="margin: 0 0 12px; color: #333">{{ item.summary }}</p>
{% endfor %}
<p style="font-size: 12px; color: #777; margin-top: 32px">You receive {{ watch.name }} because you \
subscribed to it. <a href="{{ unsubscribe_url }}">Unsubscribe</a>.</p>
</body></html>
"""
# One item: its title; several: the watch's name and how many.
DEFAULT_SUBJECT_ONE = "{{ item.title }}"
DEFAULT_SUBJECT_MANY = "{{ watch.name }}: {{ count }} new items"


def template_problems(template: str) -> list[str]:
    """What is wrong with a template (a statement other than one `for item in items` loop and its
    `endfor`, or a loop inside a loop); empty when it can be rendered."""
    problems = []
    for body in LOOP.findall(template):
        if STATEMENT.search(body):
            problems.append("a {% for %} loop cannot hold another statement ({% ... %})")
    left = STATEMENT.findall(LOOP.sub("", template))
    if left:
        problems.append(
            f"only {{% for item in items %}} ... {{% endfor %}} is understood, not {left[0][:60]}"
        )
    return problems


def summary(content: str) -> str:
    text = SPACES.sub(" ", content).strip()
    if len(text) <= SUMMARY_LENGTH:
        return text
    cut = text[:SUMMARY_LENGTH].rsplit(" ", 1)[0]
    return cut + " …"


def item_fields(data: Mapping[str, Any]) -> dict[str, str]:
    """What `{{ item.NAME }}` can name, as text."""
    fields = {name: _text(value) for name, value in data.items()}
    fields["url"] = _text(data.get("url") or data.get("external_url") or "")
    fields["summary"] = summary(_text(data.get("content") or ""))
    return fields


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(_text(part) for part in value)
    return str(value)


@dataclass(frozen=True, slots=True)
class Rendered:
    subject: str
    html: str


def render(
    *, template: str | None, subject: str | None, watch_name: str, items: Sequence[Mapping[str, Any]]
) -> Rendered:
    fields = [item_fields(data) for data in items]
    if subject is None:
        subject = DEFAULT_SUBJECT_ONE if len(fields) == 1 else DEFAULT_SUBJECT_MANY
    return Rendered(
        subject=_fill(subject, fields, watch_name, _in_subject),
        html=_fill(template or DEFAULT_TEMPLATE, fields, watch_name, _in_html),
    )


def _in_html(value: str) -> str:
    return html.escape(value, quote=True).replace("{", "&#123;").replace("}", "&#125;")


def _in_subject(value: str) -> str:
    # One line, and no double brace the send would read as a merge tag.
    return SPACES.sub(" ", value).replace("{{", "{ {").replace("}}", "} }")


def _fill(text: str, fields: list[dict[str, str]], watch_name: str, escape: Callable[[str], str]) -> str:
    def values(item: dict[str, str]) -> Callable[[re.Match[str]], str]:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name == "count":
                return str(len(fields))
            if name == "watch.name":
                return escape(watch_name)
            return escape(item.get(name.removeprefix("item."), ""))

        return one

    first = fields[0] if fields else {}

    def loop(match: re.Match[str]) -> str:
        return "".join(VALUE.sub(values(item), match.group(1)) for item in fields)

    return VALUE.sub(values(first), LOOP.sub(loop, text))
