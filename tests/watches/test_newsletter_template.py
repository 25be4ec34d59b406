"""The newsletter template of the `email` action: what it fills, what it leaves for the send (the email
API's merge tags), how it escapes item text, and which templates it refuses."""

from __future__ import annotations

import pytest

from app.watches.newsletter_template import DEFAULT_TEMPLATE, render, summary, template_problems

ITEMS = [
    {"title": "One & <two>", "url": "https://example.com/a?x=1&y=2", "content": "Body one", "author": "Ann"},
    {
        "title": "Second {{ email }}",
        "external_url": "https://example.com/b",
        "content": "",
        "tags": ["a", "b"],
    },
]


def test_the_loop_fills_each_item_escaped_and_outside_it_the_first_item() -> None:
    template = (
        "<h1>{{ watch.name }} ({{ count }})</h1><p>Top: {{ item.title }}</p>"
        '{% for item in items %}<a href="{{ item.url }}">{{ item.title }}</a>{{ item.tags }};{% endfor %}'
    )
    done = render(template=template, subject=None, watch_name="Picks <3", items=ITEMS)
    assert done.html == (
        "<h1>Picks &lt;3 (2)</h1><p>Top: One &amp; &lt;two&gt;</p>"
        '<a href="https://example.com/a?x=1&amp;y=2">One &amp; &lt;two&gt;</a>;'
        '<a href="https://example.com/b">Second &#123;&#123; email &#125;&#125;</a>a, b;'
    )


def test_merge_tags_and_unknown_names_are_left_for_the_send() -> None:
    template = '{{ first_name | "friend" }} {{ unsubscribe_url }} {{ item.nothing }}|{{ items }}'
    done = render(template=template, subject="Hi {{ first_name }}", watch_name="W", items=ITEMS[:1])
    assert done.html == '{{ first_name | "friend" }} {{ unsubscribe_url }} |{{ items }}'
    assert done.subject == "Hi {{ first_name }}"


def test_subjects_are_one_line_and_cannot_form_merge_tags() -> None:
    item = {"title": "Line one\n  line {{ two }}"}
    assert (
        render(template=None, subject=None, watch_name="W", items=[item]).subject
        == "Line one line { { two } }"
    )
    many = render(template=None, subject=None, watch_name="Weekly", items=ITEMS)
    assert many.subject == "Weekly: 2 new items"
    chosen = render(template=None, subject="{{ count }} from {{ watch.name }}", watch_name="W", items=ITEMS)
    assert chosen.subject == "2 from W"


def test_the_default_template_lists_titles_links_and_summaries_with_an_unsubscribe_link() -> None:
    done = render(template=None, subject=None, watch_name="W", items=ITEMS)
    assert 'href="https://example.com/a?x=1&amp;y=2"' in done.html and "Body one" in done.html
    assert 'href="https://example.com/b"' in done.html
    assert "{{ unsubscribe_url }}" in done.html and not template_problems(DEFAULT_TEMPLATE)


def test_summaries_cut_long_content_at_a_word() -> None:
    assert summary("short  text\n") == "short text"
    long = summary("word " * 200)
    assert len(long) <= 302 and long.endswith(" …") and "wor …" not in long


@pytest.mark.parametrize(
    "template",
    [
        "{% if x %}{% endif %}",
        "{% for post in posts %}{% endfor %}",
        "{% for item in items %}no end",
        "{% endfor %}",
        "{% for item in items %}{% for item in items %}{% endfor %}{% endfor %}",
        "{% include 'x' %}",
    ],
)
def test_templates_with_other_statements_are_refused(template: str) -> None:
    assert template_problems(template)


def test_templates_without_statements_or_with_loops_are_accepted() -> None:
    assert template_problems("plain {{ item.title }} { not a tag }") == []
    assert (
        template_problems("{%for item in items%}a{%endfor%} and {% for item in items %}b{% endfor %}") == []
    )
