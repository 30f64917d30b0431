"""The student recipe on a tiny random cross-encoder: the cut keeps the teacher's own layers, distillation
moves the student's logits onto the teacher's, two runs with one seed give identical weights, and the
teacher's logits are cached by content."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models.reranker import HFCrossEncoder
from models.testing import build_tiny_cross_encoder
from training.data import Group
from training.distill import DistillConfig, distill, init_student, teacher_logits

DOCS = ("Aspirin lowers the risk of heart attack. It thins the blood.",
        "Vitamin D is made in the skin under sunlight. Deficiency weakens bones.",
        "Insulin regulates blood sugar. Diabetes follows when cells ignore insulin.",
        "Malaria is carried by mosquitoes. Nets and drugs reduce infections.")
GROUPS = [Group(query=q, passages=tuple(DOCS[(i + j) % 4] for j in range(3)))
          for i, q in enumerate(("what thins the blood", "sunlight and bones", "blood sugar hormone",
                                 "mosquito disease", "heart attack risk", "bones in winter"))]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-teacher"), seed=5)


def test_student_keeps_the_chosen_teacher_layers(teacher: Path) -> None:
    _, student = init_student(teacher, (1,))
    _, full = init_student(teacher, (0, 1))
    assert student.config.num_hidden_layers == 1 and len(student.base_model.encoder.layer) == 1
    kept, original = student.base_model.encoder.layer[0].state_dict(), full.base_model.encoder.layer[1].state_dict()
    assert all(torch.equal(kept[k], original[k]) for k in original)
    assert torch.equal(student.classifier.weight, full.classifier.weight)
    with pytest.raises(ValueError):
        init_student(teacher, (1, 0))
    with pytest.raises(ValueError):
        init_student(teacher, (2,))


def test_teacher_logits_are_the_served_scores_and_cached(teacher: Path, tmp_path: Path) -> None:
    logits = teacher_logits(GROUPS, teacher=teacher, max_length=64, cache=tmp_path, threads=1)
    assert logits.shape == (len(GROUPS), 3)
    served = HFCrossEncoder.load(teacher, max_length=64).score([(g.query, p) for g in GROUPS for p in g.passages])
    np.testing.assert_allclose(logits.reshape(-1), served, atol=0.05)
    cached = list(tmp_path.glob("teacher_logits-*.npy"))
    assert len(cached) == 1
    np.save(cached[0], np.zeros_like(logits).reshape(-1))   # the cache is what a second call reads
    assert not teacher_logits(GROUPS, teacher=teacher, max_length=64, cache=tmp_path, threads=1).any()
    other = teacher_logits(GROUPS[:3], teacher=teacher, max_length=64, cache=tmp_path, threads=1)
    assert other.any() and len(list(tmp_path.glob("teacher_logits-*.npy"))) == 2


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_distillation_fits_the_teacher_and_is_deterministic(teacher: Path, precision: str) -> None:
    rng = np.random.default_rng(0)
    targets = rng.normal(0.0, 3.0, size=(len(GROUPS), 3)).astype(np.float32)   # far from the cut's own logits
    cfg = DistillConfig(keep=(1,), max_length=64, groups_per_step=2, epochs=30, lr=3e-3, warmup_share=0.05,
                        seed=7, threads=1, log_every=3, precision=precision)
    _, model_a, history = distill(GROUPS, targets, teacher=teacher, cfg=cfg)
    _, model_b, _ = distill(GROUPS, targets, teacher=teacher, cfg=cfg)
    state_a, state_b = model_a.state_dict(), model_b.state_dict()
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
    assert history[-1]["loss"] < 0.5 * history[0]["loss"]
    with pytest.raises(ValueError):
        distill(GROUPS[:2], targets, teacher=teacher, cfg=cfg)
