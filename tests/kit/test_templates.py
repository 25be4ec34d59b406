"""The page renderer (app/kit/templates.py): every value escaped as `html.escape` does, without NUL or
lone surrogates; markup marked safe passes; a name missing from a page's context is an error; and every
template ships in the package (setup.py's package_data)."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest
from jinja2 import UndefinedError
from markupsafe import Markup

from app.kit.templates import escape, render

ROOT = Path(__file__).resolve().parents[2]


def test_values_are_escaped_as_html_escape_does() -> None:
    assert escape('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert escape(None) == ""
    assert escape(42) == "42"


def test_nul_and_lone_surrogates_are_left_out() -> None:
    assert escape("a\x00b") == "ab"
    assert escape("a\udc80b") == "a?b"


def test_markup_marked_safe_passes_unchanged() -> None:
    assert escape(Markup("<em>kept</em>")) == "<em>kept</em>"


def test_a_page_escapes_what_it_is_given() -> None:
    page = render("forms/message.html", heading="<b>Hi</b>", paragraphs=["<script>x</script>", "a\x00"])
    assert "<title>&lt;b&gt;Hi&lt;/b&gt;</title>" in page
    assert "<h1>&lt;b&gt;Hi&lt;/b&gt;</h1>" in page
    assert "<p>&lt;script&gt;x&lt;/script&gt;</p>" in page and "<script>" not in page
    assert "<p>a</p>" in page


def test_a_name_missing_from_the_context_is_an_error() -> None:
    with pytest.raises(UndefinedError):
        render("forms/message.html", heading="Hi")


def test_every_template_is_package_data() -> None:
    setup = ast.parse((ROOT / "setup.py").read_text())
    keywords = [node for node in ast.walk(setup) if isinstance(node, ast.keyword)]
    given = next(keyword for keyword in keywords if keyword.arg == "package_data")
    patterns = ast.literal_eval(given.value)["app"]
    app_dir = ROOT / "app"
    templates = [path for path in (app_dir / "templates").rglob("*") if path.is_file()]
    assert templates
    for path in templates:
        relative = path.relative_to(app_dir).as_posix()
        # setuptools globs: `*` never crosses a `/`.
        assert any(
            fnmatch.fnmatch(relative, pattern) and relative.count("/") == pattern.count("/")
            for pattern in patterns
        ), f"{relative} is not in setup.py's package_data"
