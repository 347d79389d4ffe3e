"""Prometheus metrics of handoffs, on the service's registry (app/observability/metrics.py).
The share of conversations handed over: `supportbot_handoffs_opened_total` against the
conversations started; how fast staff respond: `supportbot_handoff_claim_seconds`."""

from prometheus_client import Counter, Histogram

from app.observability.metrics import REGISTRY
from app.settings import AUDIENCES

OPENED = Counter(
    "supportbot_handoffs_opened",
    "Conversations handed to a person, by reason: asked (keyword rule), model "
    "(request_human tool), not_found, thumbs_down",
    ("reason", "audience"),
    registry=REGISTRY,
)
CLAIMED = Counter("supportbot_handoffs_claimed", "Handoffs claimed by staff", registry=REGISTRY)
RESOLVED = Counter("supportbot_handoffs_resolved", "Handoffs resolved", registry=REGISTRY)
CLAIM_SECONDS = Histogram(
    "supportbot_handoff_claim_seconds",
    "Time from a handoff's opening to its claim",
    buckets=(30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 72 * 3600),
    registry=REGISTRY,
)

# Exported at 0 from the start, so that a dashboard's handoff rate by reason has its series.
for _reason in ("asked", "model", "not_found", "thumbs_down"):
    for _audience in AUDIENCES:
        OPENED.labels(reason=_reason, audience=_audience)
