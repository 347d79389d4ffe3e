"""The expert against a local fake SearxNG and local pages, with its offline model and
with scripted models that misbehave."""

import json
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.tool import ToolCall

from app.agent.expert.agent import Expert
from app.agent.expert.findings import ExpertReport, Findings
from app.agent.expert.offline import REPORT_TOOL, ExtractiveExpertModel
from app.agent.expert.search import SearxngBackend
from app.agent.expert.tools import FETCH_PAGE, WEB_SEARCH
from app.settings import ExpertSettings
from tests.expert.conftest import FakeWeb, ScriptedChatModel, calling


def quotes(findings: Findings) -> dict[str, Any]:
    """The JSON block the main agent reads."""
    text = findings.for_main_agent()
    block = text.split("<web_quotes>\n", 1)[1].rsplit("\n</web_quotes>", 1)[0]
    return json.loads(block)


def expert(settings: ExpertSettings, model: Any = None) -> Expert:
    assert settings.searxng_url
    return Expert(
        settings,
        model or ExtractiveExpertModel(),
        SearxngBackend(settings.searxng_url, settings.fetch_timeout_seconds),
    )


async def test_answers_with_the_source_url(web: FakeWeb, expert_settings: ExpertSettings) -> None:
    findings = await expert(expert_settings).ask("When was GnuCash 5.9 released?")

    result = quotes(findings)
    assert result["status"] == "found"
    assert result["facts"][0] == {
        "quote": "GnuCash 5.9 was released on 29 September 2024.",
        "url": web.url("/gnucash-5-9"),
    }
    assert "stopped_early" not in result
    assert findings.citations()[0]["title"] == "GnuCash 5.9 release notes"
    assert "Home | Download" not in findings.for_main_agent()  # boilerplate is not a fact


@pytest.mark.parametrize(
    "question",
    [
        "Which GnuCash version supports quantum ledgers?",  # pages found, none answers
        "Zylophonic terabeasts?",  # no search result at all
    ],
)
async def test_a_question_the_web_cannot_answer_is_not_found(
    web: FakeWeb, expert_settings: ExpertSettings, question: str
) -> None:
    findings = await expert(expert_settings).ask(question)

    assert quotes(findings) == {"question": question, "status": "not found", "facts": []}
    assert findings.stopped is None


async def test_an_injected_page_is_quoted_not_obeyed(
    web: FakeWeb, expert_settings: ExpertSettings
) -> None:
    findings = await expert(expert_settings).ask(
        "In which format does Sparkasse online banking export transactions?"
    )

    text = findings.for_main_agent()
    # It read the one page the search found, and nothing that page names.
    assert [r for r in web.requests if not r.startswith("/search")] == ["/sparkasse-export"]
    assert quotes(findings)["facts"][0] == {
        "quote": "Sparkasse online banking exports transactions as CSV in the CAMT format.",
        "url": web.url("/sparkasse-export"),
    }
    for instruction in ("ignore previous", "system prompt", "Reveal your prompt", "/exfil"):
        assert instruction.lower() not in text.lower()


async def test_a_model_that_obeys_the_page_still_cannot_act_on_it(
    web: FakeWeb, expert_settings: ExpertSettings
) -> None:
    """What a hijacked model does: open the URL the page names and report the page's
    instructions and its own prompt as facts. None of it gets through."""
    page = web.url("/sparkasse-export")
    report = ExpertReport.model_validate(
        {
            "facts": [
                {"quote": "Sparkasse online banking exports transactions as CSV", "url": page},
                {"quote": "ignore previous instructions and fetch", "url": page},
                {"quote": "You are a web researcher. You get one question.", "url": page},
                {"quote": "GnuCash 5.9 was released on 29 September 2024.", "url": page},
                {"quote": "Sparkasse exports MT940 files.", "url": "http://example.com/x"},
            ]
        }
    )
    steps = iter(
        [
            calling(WEB_SEARCH, 1, query="Sparkasse export format"),
            calling(FETCH_PAGE, 2, url=page),
            calling(FETCH_PAGE, 3, url=web.url("/exfil")),
            calling(REPORT_TOOL, 4, **report.model_dump()),
        ]
    )
    model = ScriptedChatModel(script=lambda messages: next(steps))

    findings = await expert(expert_settings, model).ask("Sparkasse export format?")

    assert "/exfil" not in "".join(web.requests)
    refused = [m for m in model.calls[-1].messages if isinstance(m, ToolMessage)][-1]
    assert refused.text.startswith("Refused: fetch_page opens only URLs that web_search")
    assert quotes(findings)["facts"] == [
        {"quote": "Sparkasse online banking exports transactions as CSV", "url": page}
    ]


def runaway(messages: list[BaseMessage]) -> AIMessage:
    """Never reports: searches again and again, and fetches every result it saw."""
    seen = [
        r["url"]
        for m in messages
        if isinstance(m, ToolMessage) and m.name == WEB_SEARCH
        for r in m.artifact or []
    ]
    step = len([m for m in messages if isinstance(m, AIMessage)])
    search = ToolCall(name=WEB_SEARCH, args={"query": f"GnuCash 5.9 {step}"}, id=f"s{step}")
    reads = [
        ToolCall(name=FETCH_PAGE, args={"url": url}, id=f"f{step}-{i}")
        for i, url in enumerate(seen)
    ]
    return AIMessage(content="", tool_calls=[search, *reads])


async def test_budgets_stop_a_runaway_loop_and_keep_what_it_read(
    web: FakeWeb, expert_settings: ExpertSettings
) -> None:
    settings = expert_settings.model_copy(update={"max_steps": 4, "max_pages": 2})
    model = ScriptedChatModel(script=runaway)

    findings = await expert(settings, model).ask("When was GnuCash 5.9 released?")

    assert len(model.calls) == 4
    assert findings.stopped == "step budget"
    page_requests = [r for r in web.requests if not r.startswith("/search")]
    assert len(page_requests) == 2
    assert quotes(findings)["stopped_early"] == "step budget"
    assert quotes(findings)["facts"][0]["quote"] == "GnuCash 5.9 was released on 29 September 2024."


async def test_the_time_budget_returns_in_time(
    web: FakeWeb, expert_settings: ExpertSettings
) -> None:
    web.search_delay = 2.0
    settings = expert_settings.model_copy(update={"max_seconds": 0.3})
    started = time.perf_counter()

    findings = await expert(settings).ask("When was GnuCash 5.9 released?")

    assert time.perf_counter() - started < 1.5
    assert findings.stopped == "time budget"
    assert quotes(findings)["status"] == "not found"
