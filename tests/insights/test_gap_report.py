"""The gap report and outcome figures over HTTP, on conversations seeded with known
outcomes: groups by topic across languages, counts, trend, links, pages, cost, and a
tenant's key seeing only its own questions."""

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import async_sessionmaker

from app.insights.gaps import GapReporter
from app.settings import ApiKey, Settings
from knowledge.embeddings import get_embedder
from tests.conftest import make_client

from .seed import BANK_SYNC, COMMENT, MOBILE_APP, Seeded, known_outcomes, seed

STAFF = {"authorization": "Bearer staff-token-0123456789"}
ACME = {"authorization": "Bearer acme-key-0123456789abcdef"}


@pytest.fixture
def api(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.widget.staff_tokens = {"alice": SecretStr("staff-token-0123456789")}
    settings.api.keys = {
        "acme": ApiKey(key=SecretStr("acme-key-0123456789abcdef"), prefix="api:acme:")
    }
    with make_client(settings, sample_index) as client:
        seed(settings.db.url, known_outcomes())
        yield client


def group_of(report: dict[str, Any], question: str) -> dict[str, Any]:
    matching = [g for g in report["groups"] if question in {e["question"] for e in g["examples"]}]
    assert len(matching) == 1, question
    return matching[0]


def test_gaps_group_questions_by_topic_across_languages(api: TestClient) -> None:
    response = api.get("/v1/insights/gaps", params={"since": "7d"}, headers=STAFF)
    assert response.status_code == 200, response.text
    report = response.json()

    bank, mobile = group_of(report, BANK_SYNC[0]), group_of(report, MOBILE_APP[0])
    assert bank is not mobile
    assert {e["question"] for e in bank["examples"]} >= set(BANK_SYNC)
    assert {e["question"] for e in mobile["examples"]} == set(MOBILE_APP)
    assert mobile["count"] == 4 and mobile["outcomes"] == {"not_found": 4}
    assert mobile["pages"] == []  # nothing near in the documentation: a page to write
    assert mobile["cost_usd"] == pytest.approx(0.08)
    # Staff see the other tenant's question too, on the bank topic.
    assert bank["count"] == 5 and bank["previous"] == 1 and bank["trend"] == 4
    assert report["groups"][0]["count"] == 5  # the largest first
    assert mobile["name"] in MOBILE_APP
    assert {"android", "iphone"} & set(mobile["words"])

    rated = group_of(report, "How do I change the number format of my invoices?")
    assert rated["outcomes"].get("rated_down") == 1
    assert rated["pages"][0]["source"] == "en/create-invoice.md"
    example = next(e for e in rated["examples"] if e["outcome"] == "rated_down")
    assert example["transcript"] == "/v1/conversations/api:acme:rated"
    assert example["comment"] == COMMENT and example["handoff_reason"] is None
    transcript = api.get(example["transcript"], headers=STAFF)
    assert transcript.status_code == 200
    assert transcript.json()["messages"][0]["content"] == example["question"]

    questions = {e["question"] for g in report["groups"] for e in g["examples"]}
    assert "How do I create an invoice?" not in questions  # answered, no 👎
    # a request for a person is a handoff (counted in the outcomes), not a knowledge gap
    assert "I want to talk to a real person about my contract" not in questions
    assert not {"talk", "real", "person"} & {w for g in report["groups"] for w in g["words"]}
    # every timestamp with its time zone, on SQLite too (which stores them naive)
    stamps = [report["since"], report["until"], example["asked_at"]]
    assert all(datetime.fromisoformat(s).tzinfo is not None for s in stamps)
    assert report["questions"] == 10


def test_an_api_key_sees_only_its_own_tenants_questions(api: TestClient) -> None:
    report = api.get("/v1/insights/gaps", params={"since": "7d"}, headers=ACME).json()
    questions = {e["question"] for g in report["groups"] for e in g["examples"]}
    assert not any(q.startswith("Другой клиент") for q in questions)
    assert report["questions"] == 9  # its 8 not found and its 👎 (its person is a handoff)
    assert all(
        e["conversation_key"].startswith("api:acme:")
        for g in report["groups"]
        for e in g["examples"]
    )
    outcomes = api.get("/v1/insights/outcomes", params={"since": "7d"}, headers=ACME).json()
    assert outcomes["outcomes"]["not_found"] == 8
    staff = api.get("/v1/insights/outcomes", params={"since": "7d"}, headers=STAFF).json()
    assert staff["outcomes"]["not_found"] == 9


def test_outcome_figures(api: TestClient) -> None:
    response = api.get("/v1/insights/outcomes", params={"since": "7d"}, headers=STAFF)
    assert response.status_code == 200, response.text
    figures = response.json()
    assert figures["outcomes"] == {"answered": 1, "not_found": 9, "handed_off": 1, "rated_down": 1}
    assert figures["conversations"] == 12
    assert figures["resolved"] == 1  # only the answered one: no 👎, no person
    assert figures["handoffs_by_reason"] == {"asked": 1}
    assert figures["cost_per_resolved_usd"] == pytest.approx(figures["cost_usd"])
    assert figures["cache_hit_rate_by_profile"] == {"client": pytest.approx(0.6)}
    assert (figures["cost_simulated"], figures["simulated_cost_usd"]) == (False, 0.0)


def test_the_offline_model_s_cost_is_said_to_be_simulated(
    settings: Settings, sample_index: Path
) -> None:
    settings.widget.staff_tokens = {"alice": SecretStr("staff-token-0123456789")}
    offline = Seeded("api:o:1", "How do I create an invoice?", "answered", cost_usd=0.03)
    with make_client(settings, sample_index) as client:
        seed(settings.db.url, [replace(offline, model="offline")])
        figures = client.get("/v1/insights/outcomes?since=7d", headers=STAFF).json()
        assert (figures["cost_simulated"], figures["simulated_cost_usd"]) == (True, 0.03)
        assert figures["cost_usd"] == 0.03
        # one billed call in the period: the figure is partly simulated
        seed(settings.db.url, [replace(offline, key="api:o:2", cost_usd=0.01)])
        figures = client.get("/v1/insights/outcomes?since=7d", headers=STAFF).json()
    assert (figures["cost_simulated"], figures["simulated_cost_usd"]) == (False, 0.03)
    assert figures["cost_usd"] == pytest.approx(0.04)


def test_pages_and_bad_periods(api: TestClient) -> None:
    first = api.get("/v1/insights/gaps", params={"since": "7d", "limit": 1}, headers=STAFF).json()
    second = api.get(
        "/v1/insights/gaps", params={"since": "7d", "limit": 1, "offset": 1}, headers=STAFF
    ).json()
    assert len(first["groups"]) == len(second["groups"]) == 1
    assert first["total_groups"] >= 3 and first["groups"] != second["groups"]
    bad = api.get("/v1/insights/gaps", params={"since": "seven days"}, headers=STAFF)
    assert bad.status_code == 422 and "7d" in bad.text
    assert api.get("/v1/insights/gaps", params={"since": "7d"}).status_code == 401


@pytest.mark.parametrize(
    ("since", "reason"),
    [
        ("99999999999w", "period '99999999999w': at most 3650 days"),
        ("522w", "period '522w': at most 3650 days"),
        ("\u00b2d", "period '\u00b2d': use a positive whole number and m, h, d or w (e.g. 7d)"),
        ("0d", "period '0d': use a positive whole number and m, h, d or w (e.g. 7d)"),
        ("1.5h", "period '1.5h': use a positive whole number and m, h, d or w (e.g. 7d)"),
        ("9" * 33 + "d", "since: String should have at most 32 characters"),
    ],
)
def test_a_period_out_of_bounds_is_refused_with_its_reason(
    api: TestClient, since: str, reason: str
) -> None:
    for path in ("/v1/insights/gaps", "/v1/insights/outcomes"):
        refused = api.get(path, params={"since": since}, headers=STAFF)
        assert (refused.status_code, refused.json()) == (422, {"detail": reason}), path
    longest = api.get("/v1/insights/outcomes", params={"since": "3650d"}, headers=STAFF)
    assert longest.status_code == 200, longest.text


def test_a_period_ends_after_now_so_the_latest_turns_are_in_it() -> None:
    reporter = GapReporter(async_sessionmaker(), lambda: get_embedder())
    now = datetime(2026, 12, 2, 5, 51, 30, tzinfo=UTC)
    since, until = reporter.period(timedelta(days=1), now)
    assert until == datetime(2026, 12, 2, 5, 52, tzinfo=UTC)
    assert since == until - timedelta(days=1)
    # Within the same minute: the same period, so the same cached report.
    assert reporter.period(timedelta(days=1), now + timedelta(seconds=29)) == (since, until)


def test_an_anonymous_caller_of_an_open_api_may_not_read_the_insights(client: TestClient) -> None:
    for path in ("/v1/insights/gaps", "/v1/insights/outcomes"):
        refused = client.get(path, params={"since": "7d"})
        assert refused.status_code == 403, path
        assert refused.json() == {"detail": "the insights are for staff and API keys"}
