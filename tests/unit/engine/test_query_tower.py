"""The query tower (server/engine/query_tower.py): the embedder's top layers, retrained, read a query's lower states."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from models.embedder import HFEmbedder
from models.testing import build_tiny_encoder
from server.engine.query_tower import PROVENANCE, WEIGHTS, load_query_tower


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> HFEmbedder:
    return HFEmbedder.load(build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder")), dtype="float32",
                           max_length=32)


def write_tower(folder, embedder: HFEmbedder, *, start: int, name: str | None = None,  # type: ignore[no-untyped-def]
                shift: float = 0.0) -> None:
    layers = embedder._model.encoder.layer[start:]
    state = {k: (v + shift).half().contiguous() for k, v in layers.state_dict().items()}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / WEIGHTS))
    (folder / PROVENANCE).write_text(json.dumps({"embedder": name or embedder.name, "start": start}))


TEXTS = ["where does Alice live now?", "what did I buy for the garden last spring", "budget"]


def test_a_tower_of_the_embedders_own_layers_gives_its_query_vectors(  # type: ignore[no-untyped-def]
        embedder: HFEmbedder, tmp_path) -> None:
    write_tower(tmp_path / "t", embedder, start=1)
    tower = load_query_tower(tmp_path / "t", embedder=embedder)
    assert tower is not None and tower.start == 1
    got = tower.search_vectors(TEXTS)
    expected = embedder.embed(TEXTS)
    assert got.shape == expected.shape and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # float16 weights on disk: the same vectors to rounding
    assert (np.sum(got * expected, axis=1) > 0.999).all()


def test_retrained_layers_move_the_vector_and_the_embedders_own_stay(  # type: ignore[no-untyped-def]
        embedder: HFEmbedder, tmp_path) -> None:
    before = {k: v.clone() for k, v in embedder._model.state_dict().items()}
    write_tower(tmp_path / "t", embedder, start=1, shift=0.05)
    tower = load_query_tower(tmp_path / "t", embedder=embedder)
    assert tower is not None
    moved = tower.search_vectors(TEXTS)
    assert (np.sum(moved * embedder.embed(TEXTS), axis=1) < 0.9999).any()
    after = embedder._model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_only_the_mapped_rows_change(embedder: HFEmbedder, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_tower(tmp_path / "t", embedder, start=1, shift=0.05)
    tower = load_query_tower(tmp_path / "t", embedder=embedder)
    assert tower is not None
    own = list(embedder.embed(TEXTS))
    out = tower.map_all(TEXTS, own, [True, False, True])
    assert out[1] is own[1]
    assert np.allclose(out[0], tower.search_vectors([TEXTS[0]])[0], atol=1e-5)
    assert np.allclose(out[2], tower.search_vectors([TEXTS[2]])[0], atol=1e-5)
    assert tower.map_all(TEXTS, own, [False] * 3) == own


def test_a_tower_loads_only_for_the_embedder_it_was_trained_for(  # type: ignore[no-untyped-def]
        embedder: HFEmbedder, tmp_path) -> None:
    write_tower(tmp_path / "other", embedder, start=1, name="multilingual-e5-small")
    assert load_query_tower(tmp_path / "other", embedder=embedder) is None
    (tmp_path / "empty").mkdir()
    assert load_query_tower(tmp_path / "empty", embedder=embedder) is None


def test_the_query_adapter_option_loads_a_tower_folder_as_a_tower(  # type: ignore[no-untyped-def]
        embedder: HFEmbedder, tmp_path) -> None:
    from server.config import load_config
    from server.engine.engine import load_query_adapter_for
    from server.engine.query_tower import QueryTower

    write_tower(tmp_path / "t", embedder, start=1)
    config = load_config(env={}, overrides={"advanced": {"query_adapter": str(tmp_path / "t")}})
    loaded = load_query_adapter_for(config, embedder)
    assert isinstance(loaded, QueryTower) and loaded.start == 1
    assert load_query_adapter_for(load_config(env={}, overrides={"advanced": {"query_adapter": ""}}), embedder) is None
