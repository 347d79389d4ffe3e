"""Benchmarks of the knowledge base on the GnuCash manuals (Debian's gnucash-docs, or any
folder laid out like it) and the dev conversations in evals/scenarios/.

Retrieval: every turn with gold pages is a query (its text; a followup or return can also
be prefixed with the text of the turn it refers to); a hit is a retrieved passage whose
source page is a gold page. Cross-lingual: the same metrics on `translated_queries.yaml`,
Russian and German renderings of dev questions. Latency: query embedding and the Qdrant
query timed apart.
"""

import resource
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from knowledge.store import IngestReport, KnowledgeBase

EVAL_FILES = ("client_session_dev.yaml", "staff_chats_dev.yaml")
TRANSLATED_QUERIES = Path(__file__).with_name("translated_queries.yaml")
FollowupMode = Literal["turn", "with-context"]


@dataclass(frozen=True)
class EvalQuery:
    id: str
    text: str
    gold: frozenset[str]
    kind: str
    language: str = "en"


def load_eval_queries(evals_dir: Path, followups: FollowupMode = "turn") -> list[EvalQuery]:
    """Turns with gold pages; with `with-context`, a turn that refers to an earlier one is
    asked as "<earlier turn> <this turn>", the way an agent would rephrase it."""
    conversations: list[tuple[str, list[dict[str, Any]]]] = []
    for name in EVAL_FILES:
        data = yaml.safe_load((evals_dir / name).read_text(encoding="utf-8"))
        if "turns" in data:
            conversations.append((data["name"], data["turns"]))
        conversations.extend((chat["id"], chat["turns"]) for chat in data.get("chats", []))
    queries = []
    for conversation, turns in conversations:
        by_id = {turn["id"]: turn for turn in turns}
        for turn in turns:
            if not turn.get("gold"):
                continue
            text = turn["text"]
            if followups == "with-context" and turn.get("refers_to") in by_id:
                text = f"{by_id[turn['refers_to']]['text']} {text}"
            queries.append(
                EvalQuery(
                    f"{conversation}#{turn['id']}", text, frozenset(turn["gold"]), turn["kind"]
                )
            )
    return queries


def load_translated_queries(path: Path = TRANSLATED_QUERIES) -> list[EvalQuery]:
    return [
        EvalQuery(item["id"], item["text"], frozenset(item["gold"]), "question", item["language"])
        for item in yaml.safe_load(path.read_text(encoding="utf-8"))
    ]


@dataclass(frozen=True)
class RetrievalScores:
    queries: int
    hit_at_1: float
    hit_at_5: float
    mrr: float
    misses: tuple[str, ...]  # ids of queries with no gold page in the top 5

    def as_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "hit@1": round(self.hit_at_1, 3),
            "hit@5": round(self.hit_at_5, 3),
            "mrr@10": round(self.mrr, 3),
            "misses": list(self.misses),
        }


def score_retrieval(
    kb: KnowledgeBase,
    queries: Iterable[EvalQuery],
    *,
    collection: str | None = None,
    language: str | None = None,
) -> RetrievalScores:
    ranks: list[int | None] = []
    ids = []
    for query in queries:
        passages = kb.search(query.text, 10, collection=collection, language=language)
        sources = [passage.source for passage in passages]
        ranks.append(next((i for i, source in enumerate(sources, 1) if source in query.gold), None))
        ids.append(query.id)
    count = len(ranks) or 1
    return RetrievalScores(
        queries=len(ranks),
        hit_at_1=sum(rank == 1 for rank in ranks) / count,
        hit_at_5=sum(rank is not None and rank <= 5 for rank in ranks) / count,
        mrr=sum(1 / rank for rank in ranks if rank is not None) / count,
        misses=tuple(i for i, rank in zip(ids, ranks, strict=True) if rank is None or rank > 5),
    )


@dataclass(frozen=True)
class IngestMeasurement:
    report: IngestReport
    seconds: float
    cpu_seconds: float  # all threads of this process: comparable on a busy machine
    peak_rss_mb: float


def measure_ingest(
    kb: KnowledgeBase,
    folder: Path,
    collection: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> IngestMeasurement:
    started, cpu_started = time.perf_counter(), time.process_time()
    report = kb.ingest(folder, collection, progress=progress)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    # ru_maxrss is the process's peak so far, in KiB on Linux: it includes loading the model.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return IngestMeasurement(report, seconds, cpu_seconds, peak)


@dataclass(frozen=True)
class LatencyMeasurement:
    queries: int
    embed_p50_ms: float
    embed_p95_ms: float
    search_p50_ms: float
    search_p95_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {key: round(value, 2) for key, value in self.__dict__.items()}


def measure_latency(
    kb: KnowledgeBase,
    queries: list[str],
    k: int,
    *,
    collection: str | None = None,
    language: str | None = None,
    rounds: int = 3,
) -> LatencyMeasurement:
    """Per query: embedding time, then Qdrant time (embedding excluded); after a warm-up."""
    kb.search(queries[0], k, collection=collection, language=language)
    embed_ms: list[float] = []
    search_ms: list[float] = []
    for _ in range(rounds):
        for query in queries:
            started = time.perf_counter()
            vector = kb.embedder.embed_query(query)
            embedded = time.perf_counter()
            kb.search_by_vector(query, vector, k, collection=collection, language=language)
            finished = time.perf_counter()
            embed_ms.append((embedded - started) * 1000)
            search_ms.append((finished - embedded) * 1000)
    return LatencyMeasurement(
        queries=len(search_ms),
        embed_p50_ms=_percentile(embed_ms, 50),
        embed_p95_ms=_percentile(embed_ms, 95),
        search_p50_ms=_percentile(search_ms, 50),
        search_p95_ms=_percentile(search_ms, 95),
    )


def _percentile(values: list[float], percent: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]
