"""A follow-up is searched with the previous question's topic; other messages as written."""

from pathlib import Path

import pytest
import yaml

from knowledge import bench
from knowledge.keywords import query_language
from knowledge.queries import contextual_query, looks_like_followup

PREVIOUS = "OFX import doesn't match transactions that are 5 days off. Which preference?"


@pytest.mark.parametrize(
    "text",
    [
        "and for ATM withdrawals where the bank amount includes the fee?",
        "what if they only paid half of it?",
        "does it work for multi-currency splits too?",
        "und wenn der Vermieter einen Monat aussetzt?",
        "а если клиент заплатил только половину?",
    ],
)
def test_a_followup_carries_the_previous_topic(text: str) -> None:
    assert looks_like_followup(text)
    query = contextual_query(text, PREVIOUS)
    assert query.endswith(text)
    assert query.startswith("ofx import match transactions days")
    assert "which" not in query.split()


@pytest.mark.parametrize(
    "text",
    [
        "How do I reconcile our business account against the monthly bank statement?",
        "Our tax advisor wants all transactions of the year as a spreadsheet. How do I export "
        "them to a file he can open?",
    ],
)
def test_a_question_of_its_own_is_searched_as_written(text: str) -> None:
    assert not looks_like_followup(text)
    assert contextual_query(text, PREVIOUS) == text


def test_the_first_message_has_no_context() -> None:
    assert contextual_query("and the fee?", None) == "and the fee?"


def test_the_held_out_questions_cover_three_languages_with_english_renderings() -> None:
    english = bench.load_heldout_queries("en")
    russian = bench.load_heldout_queries("ru")
    german = bench.load_heldout_queries("de")
    assert (len(english) >= 30, len(russian) >= 20, len(german) >= 20) == (True, True, True)
    translated = bench.load_heldout_queries("de", as_english=True)
    assert [q.id for q in translated] == [q.id for q in german]
    assert translated[0].text != german[0].text
    assert all(q.gold and all(g.startswith("gnucash-") for g in q.gold) for q in english)


def test_the_second_held_out_set_is_english_and_asks_nothing_the_first_asks() -> None:
    second = bench.load_heldout_queries("en", path=bench.SECOND_HELDOUT_QUERIES)
    first = bench.load_heldout_queries("en")
    assert len(second) >= 30
    assert len({q.id for q in second}) == len(second)
    assert not {q.text for q in second} & {q.text for q in first}
    assert all(q.gold and all(g.startswith("gnucash-") for g in q.gold) for q in second)


@pytest.mark.parametrize(
    ("language", "path"),
    [
        ("en", bench.HELDOUT_QUERIES),
        ("ru", bench.HELDOUT_QUERIES),
        ("de", bench.HELDOUT_QUERIES),
        ("en", bench.SECOND_HELDOUT_QUERIES),
    ],
)
def test_every_held_out_question_has_the_chat_models_english_query(
    language: str, path: Path
) -> None:
    asked = bench.load_heldout_queries(language, path=path)
    runs = [
        bench.load_heldout_queries(language, model_run=run, path=path) for run in bench.MODEL_RUNS
    ]
    for searched in runs:
        assert [q.id for q in searched] == [q.id for q in asked]
        assert [q.gold for q in searched] == [q.gold for q in asked]
        assert all(q.text.strip() and query_language(q.text) == "en" for q in searched)
        assert {q.language for q in searched} == {"en"}
    assert runs[0] != runs[1]


def test_a_german_page_counts_for_its_english_twin() -> None:
    assert bench.english_twin("gnucash-help-de/trans-sched.html") == (
        "gnucash-help-en/trans-sched.html"
    )
    assert bench.english_twin("gnucash-help-en/trans-sched.html") == (
        "gnucash-help-en/trans-sched.html"
    )


def test_bench_asks_followups_as_the_offline_model_would(tmp_path: Path) -> None:
    chat = {
        "id": "chat-1",
        "turns": [
            {"id": 1, "text": PREVIOUS, "kind": "question", "gold": ["a.html"]},
            {"id": 2, "text": "and the fee?", "kind": "followup", "refers_to": 1, "gold": ["a"]},
        ],
    }
    (tmp_path / "staff.yaml").write_text(yaml.safe_dump({"name": "staff", "chats": [chat]}))
    turn, context, offline = (
        [q.text for q in bench.load_eval_queries(tmp_path, mode, ["staff.yaml"])]
        for mode in ("turn", "with-context", "offline")
    )
    assert turn == [PREVIOUS, "and the fee?"]
    assert context[1] == f"{PREVIOUS} and the fee?"
    assert offline[1] == "ofx import match transactions days off preference and the fee?"
