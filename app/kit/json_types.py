"""Names for JSON whose shape is the client's, not ours."""

from __future__ import annotations

from typing import Any

# Marks free-form client JSON (a watch action's config, an engine's extracted fields, a webhook's
# payload, custom field maps): a service returns typed results everywhere else, and this name lets the
# layout rule tell the two apart.
JsonObject = dict[str, Any]
