"""A `StrEnum` in a wire schema, documented inline as the committed OpenAPI documents always had it:
`type: string, enum: [values]` under the field's own title, not a `$ref` to a component named after
the enum (what pydantic and FastAPI make of an enum type: FastAPI collects every enum class a response
model names into the document's components).

At run time the field's type is a `Literal` of the members (validated to the members, serialized as the
values); the type checker sees the enum itself:

    if TYPE_CHECKING:
        RunStateField = RunState
    else:
        RunStateField = inline_enum(RunState)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal


def inline_enum(enum: type[StrEnum]) -> Any:
    """The members of `enum` as a `Literal` (the type checker cannot follow this: see the docstring)."""
    return Literal[tuple(enum)]
