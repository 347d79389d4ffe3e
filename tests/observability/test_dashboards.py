"""The Grafana dashboard in deploy/grafana queries only metrics the service exports."""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "supportbot.json"
METRIC_NAME = re.compile(r"\bsupportbot_[a-z0-9_]+")


def queries(node: Any) -> Iterator[str]:
    """Every PromQL string of the dashboard: panel targets and template variables."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, dict) and "query" in value:
                yield value["query"]
            else:
                yield from queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from queries(item)


def exported_names(client: TestClient) -> set[str]:
    """The sample names /metrics serves after one turn (`_total`, `_bucket`, ... included)."""
    response = client.post(
        "/v1/conversations/dashboard/messages",
        json={"audience": "client", "author": "Ann", "text": "How do I create an invoice?"},
    )
    assert response.status_code == 200, response.text
    body = client.get("/metrics").text
    return {
        sample.name for family in text_string_to_metric_families(body) for sample in family.samples
    }


def test_every_panel_queries_metrics_the_service_exports(client: TestClient) -> None:
    dashboard = json.loads(Path(DASHBOARD).read_text())
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    exported = exported_names(client)

    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert METRIC_NAME.search(target["expr"]), (panel["title"], target["expr"])
    used = {name for query in queries(dashboard) for name in METRIC_NAME.findall(query)}
    assert used - exported == set()
    # The views the dashboard is for: cache, cost, turns and failures, latency, delivery.
    assert {
        "supportbot_llm_cached_input_tokens_total",
        "supportbot_llm_input_tokens_total",
        "supportbot_llm_cost_usd_total",
        "supportbot_turns_total",
        "supportbot_turn_duration_seconds_bucket",
        "supportbot_telegram_undelivered_total",
        "supportbot_turn_outcomes_total",
        "supportbot_handoffs_opened_total",
    } <= used
