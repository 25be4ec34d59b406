"""kit's /v1 validation learns a model's source kinds from the model itself (kit imports no models)."""

from __future__ import annotations

from app.feeds.specs import FeedInput, FeedPatch, SourceInput
from app.kit.v1_input import invalid, union_tags, validate
from app.models import SourceKind
from app.watches.specs import WatchInput


def errors_of(model: type, data: object) -> dict[str, list[str]]:
    try:
        validate(model, data)
    except type(invalid({})) as exc:
        return exc.errors
    raise AssertionError("valid")


def test_the_tags_are_the_models_source_kinds_in_their_declared_order() -> None:
    assert union_tags(FeedInput) == union_tags(SourceInput) == tuple(SourceKind)
    assert union_tags(FeedPatch) == union_tags(WatchInput) == ()


def test_a_missing_or_unknown_kind_names_the_kinds_and_a_member_error_has_no_kind_in_its_path() -> None:
    kinds = ", ".join(SourceKind)
    assert errors_of(SourceInput, {"spec": {}}) == {
        "spec": [f"A source spec needs a `kind`: one of {kinds}."]
    }
    assert errors_of(SourceInput, {"spec": {"kind": "nope"}}) == {
        "spec": [f"Unknown source kind 'nope': use one of {kinds}."]
    }
    assert errors_of(SourceInput, {"spec": {"kind": "rss"}}) == {"spec.url": ["This field is required."]}
