"""The registered engine kinds (what an action's `engine.kind` may name), apart from their code so
validation needs no engine imported."""

from __future__ import annotations

# `openai_compat` first: the server's default engine when an action leaves `engine.kind` empty.
ENGINE_KINDS = ("openai_compat", "local")
DEFAULT_ENGINE = "openai_compat"
# Engines that can score items (semantic_filter) but not fill fields (extract).
SEMANTIC_ONLY_ENGINES = ("local",)
