"""A BERT encoder forward without padding, for batched CPU inference.

A padded batch spends compute on pad tokens in every projection and feed-forward layer: for the
serving benchmark's queries (11.4 tokens on average, at most 21) a batch of 12 is 23 % padding and a
batch of 32 is 30 %. Here the tokens of every sequence are packed into one ``(tokens, hidden)``
matrix: embeddings, projections, feed-forward layers and layer norms run on real tokens only, and
only the attention core (``q·kᵀ``, softmax, ``·v``, a small share of the work at these lengths) is
scattered into a padded ``(batch, heads, longest, head_dim)`` layout and gathered back. The weights
are the Hugging Face model's own (same dtype); the result matches the padded network's last hidden
state at the real tokens to rounding (tested).

Supports post-LayerNorm BERT-family encoders with absolute position embeddings (BERT, MiniLM,
the cross-encoders built on them). :func:`supports` says whether a loaded model qualifies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F


def supports(model: Any) -> bool:
    """Whether ``model`` (a transformers BertModel, or a head model around one) can run unpadded."""
    base = getattr(model, "base_model", model)
    config = getattr(model, "config", None)
    if config is None or type(base).__name__ != "BertModel":
        return False
    return (getattr(config, "position_embedding_type", "absolute") == "absolute"
            and getattr(config, "hidden_act", None) in ("gelu", "gelu_new", "gelu_pytorch_tanh")
            and not getattr(config, "is_decoder", False))


class UnpaddedBert(torch.nn.Module):
    """``forward(**{k: pack(...)[k] for k in PACKED_INPUTS})`` → the last hidden state of every packed
    token, ``(tokens, hidden)``.

    ``gather`` holds, for each ``(sequence, position)`` slot of the padded attention layout in row-major
    order, the packed token there (token 0 where the sequence is shorter); ``scatter`` holds each packed
    token's slot; ``key_mask`` marks the real slots, ``(batch, 1, 1, longest)``.
    """

    def __init__(self, bert: Any) -> None:
        super().__init__()
        config = bert.config
        self.heads = int(config.num_attention_heads)
        self.hidden = int(config.hidden_size)
        self.head_dim = self.hidden // self.heads
        self.gelu_tanh = config.hidden_act in ("gelu_new", "gelu_pytorch_tanh")
        emb = bert.embeddings
        self.word = emb.word_embeddings
        self.position = emb.position_embeddings
        self.token_type = emb.token_type_embeddings
        self.emb_norm = emb.LayerNorm
        self.layers = bert.encoder.layer
        # One (3·hidden, hidden) projection per layer instead of three: one GEMM, one gather.
        self.qkv = torch.nn.ModuleList()
        for layer in self.layers:
            sa = layer.attention.self
            fused = torch.nn.Linear(self.hidden, 3 * self.hidden, dtype=sa.query.weight.dtype,
                                    device=sa.query.weight.device)
            with torch.no_grad():
                fused.weight.copy_(torch.cat((sa.query.weight, sa.key.weight, sa.value.weight)))
                fused.bias.copy_(torch.cat((sa.query.bias, sa.key.bias, sa.value.bias)))
            self.qkv.append(fused)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, position_ids: torch.Tensor,
                key_mask: torch.Tensor, gather: torch.Tensor, scatter: torch.Tensor) -> torch.Tensor:
        x = self.word(input_ids) + self.token_type(token_type_ids) + self.position(position_ids)
        x = self.emb_norm(x)
        batch, longest = key_mask.shape[0], key_mask.shape[-1]
        scale = 1.0 / math.sqrt(self.head_dim)
        for layer, qkv_proj in zip(self.layers, self.qkv):
            att = layer.attention
            # Pad slots repeat token 0: as keys they are masked out, as queries their rows are dropped.
            qkv = qkv_proj(x)[gather].view(batch, longest, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            ctx = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=key_mask, scale=scale)
            ctx = ctx.transpose(1, 2).reshape(batch * longest, self.hidden)[scatter]
            x = att.output.LayerNorm(att.output.dense(ctx) + x)
            inner = layer.intermediate.dense(x)
            inner = F.gelu(inner, approximate="tanh") if self.gelu_tanh else F.gelu(inner)
            x = layer.output.LayerNorm(layer.output.dense(inner) + x)
        return x


PACKED_INPUTS = ("input_ids", "token_type_ids", "position_ids", "key_mask", "gather", "scatter")
"""The keys of :func:`pack`'s result that :class:`UnpaddedBert` takes (the rest are for pooling)."""


def pack(ids: list[Any], types: list[Any], device: torch.device) -> dict[str, torch.Tensor]:
    """The packed inputs of :class:`UnpaddedBert` for token id rows ``ids`` (and their type ids), plus
    what pooling needs: ``lengths``, ``seq_index`` (each packed token's sequence) and ``starts`` (each
    sequence's first packed token)."""
    lengths = np.fromiter((len(r) for r in ids), dtype=np.int64, count=len(ids))
    tokens = int(lengths.sum())
    longest = int(lengths.max())
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    position = np.arange(tokens, dtype=np.int64) - np.repeat(starts, lengths)
    slot = np.arange(longest, dtype=np.int64)[None, :]
    valid = slot < lengths[:, None]
    gather = np.where(valid, starts[:, None] + slot, 0).reshape(-1)
    seq_index = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
    scatter = seq_index * longest + position
    return {
        "input_ids": torch.from_numpy(np.concatenate(ids)).to(device),
        "token_type_ids": torch.from_numpy(np.concatenate(types)).to(device),
        "position_ids": torch.from_numpy(position).to(device),
        "key_mask": torch.from_numpy(valid[:, None, None, :]).to(device),
        "gather": torch.from_numpy(gather).to(device),
        "scatter": torch.from_numpy(scatter).to(device),
        "lengths": torch.from_numpy(lengths).to(device),
        "seq_index": torch.from_numpy(seq_index).to(device),
        "starts": torch.from_numpy(starts).to(device),
    }
