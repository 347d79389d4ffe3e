"""The one tokenizer: the same tokens as bpe-openai's own `Encoding`, prefixes cut between
characters, and a text naming a special token counted as text."""

import bpe_openai

from knowledge.tokens import ENCODING_NAME, count_tokens, encode, leading_text

TEXTS = [
    "How do I create an invoice?",
    "Wie erstelle ich eine Rechnung für einen neuen Kunden?",
    "Как записать частичную оплату?",
    "日本語のテキストです",
    "ꙮꙮ ᚠᚢᚦ 𓀀𓀁 emoji 😀😀",
]


def test_the_tokens_are_bpe_openais() -> None:
    encoding = bpe_openai.get_encoding(ENCODING_NAME)
    for text in TEXTS:
        assert encode(text) == encoding.encode(text), text
        assert count_tokens(text) == len(encoding.encode(text))


def test_a_prefix_ends_between_characters_within_the_budget() -> None:
    for text in TEXTS:
        for budget in range(1, count_tokens(text) + 1):
            prefix = leading_text(text, budget)
            assert text.startswith(prefix)
            assert not prefix or count_tokens(prefix) <= budget
    # Four-byte characters split over byte tokens: the cut leaves a split one out.
    assert leading_text("𓀀𓀁", 1) == ""
    assert leading_text("ꙮꙮ ᚠᚢᚦ 𓀀𓀁", count_tokens("ꙮꙮ ᚠᚢᚦ 𓀀") + 1) == "ꙮꙮ ᚠᚢᚦ 𓀀"


def test_a_special_tokens_name_is_text() -> None:
    assert count_tokens("see <|endoftext|> here") > 3
