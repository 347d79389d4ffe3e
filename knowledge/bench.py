"""Benchmarks of the knowledge base on the GnuCash manuals (Debian's gnucash-docs, or any
folder laid out like it) and the dev conversations in evals/scenarios/.

Retrieval: every turn with gold pages is a query (its text; or, for a followup or return,
the text of the turn it refers to before it; or what the offline model searches:
`knowledge.queries.contextual_query` with the previous turn); a hit is a retrieved passage
whose source page is a gold page or the German twin of one (the GnuCash manuals give both
languages the same file names). The question sets are in evals/bench/. Held-out:
`heldout_questions.yaml`, questions in users' words that nothing was tuned on, in English,
Russian and German (asked as written, and as the English query a real model would send),
and `heldout_questions_2.yaml`, a second English set written after the levers had been
chosen. Cross-lingual dev: `translated_queries.yaml`, Russian and German renderings of dev
questions. Latency: query embedding and the search (Qdrant plus in-process BM25) timed apart.
"""

import resource
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from knowledge.ingest import IngestReport
from knowledge.queries import contextual_query
from knowledge.store import KnowledgeBase

EVAL_FILES = ("client_session_dev.yaml", "staff_chats_dev.yaml")
STAFF_CHATS = "staff_chats_dev.yaml"
# The question sets live with the other eval data (evals/bench/), shipped with the package.
BENCH_DATA = Path(__file__).resolve().parents[1] / "evals" / "bench"
TRANSLATED_QUERIES = BENCH_DATA / "translated_queries.yaml"
HELDOUT_QUERIES = BENCH_DATA / "heldout_questions.yaml"
# A second English set, written later and blind to every lever measured on the first.
SECOND_HELDOUT_QUERIES = BENCH_DATA / "heldout_questions_2.yaml"
# The first search a chat model sent for each held-out question, shown only the question,
# the system prompt and the tool's description; two independent runs (the file's header
# says how they were made).
MODEL_QUERIES = BENCH_DATA / "model_queries.yaml"
MODEL_RUNS = (1, 2)
FollowupMode = Literal["turn", "with-context", "offline"]
# Manual folders whose pages have a twin of the same file name in the other language.
_TWIN_FOLDERS = {"gnucash-help-de/": "gnucash-help-en/", "gnucash-guide-de/": "gnucash-guide-en/"}


@dataclass(frozen=True)
class EvalQuery:
    id: str
    text: str
    gold: frozenset[str]
    kind: str
    language: str = "en"


def load_eval_queries(
    evals_dir: Path, followups: FollowupMode = "turn", files: Iterable[str] = EVAL_FILES
) -> list[EvalQuery]:
    """Turns with gold pages; with `with-context`, a turn that refers to an earlier one is
    asked as "<earlier turn> <this turn>", the way an agent would rephrase it; with
    `offline`, as the offline model asks it (knowing only the previous turn)."""
    conversations: list[tuple[str, list[dict[str, Any]]]] = []
    for name in files:
        data = yaml.safe_load((evals_dir / name).read_text(encoding="utf-8"))
        if "turns" in data:
            conversations.append((data["name"], data["turns"]))
        conversations.extend((chat["id"], chat["turns"]) for chat in data.get("chats", []))
    queries = []
    for conversation, turns in conversations:
        by_id = {turn["id"]: turn for turn in turns}
        for position, turn in enumerate(turns):
            if not turn.get("gold"):
                continue
            text = turn["text"]
            if followups == "with-context" and turn.get("refers_to") in by_id:
                text = f"{by_id[turn['refers_to']]['text']} {text}"
            elif followups == "offline" and position:
                text = contextual_query(text, turns[position - 1]["text"])
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


def load_heldout_queries(
    language: str,
    *,
    as_english: bool = False,
    model_run: int | None = None,
    path: Path = HELDOUT_QUERIES,
) -> list[EvalQuery]:
    """The held-out questions in `language`; `as_english`: their English renderings;
    `model_run` (1 or 2): the query a chat model wrote for each in that run
    (`MODEL_QUERIES`)."""
    model_queries = _model_queries(model_run) if model_run else {}

    def text_of(item: dict[str, Any]) -> str:
        if model_run:
            return model_queries[item["id"]]
        return str(item["english"] if as_english else item["text"])

    return [
        EvalQuery(
            item["id"],
            text_of(item),
            frozenset(item["gold"]),
            "question",
            "en" if as_english or model_run else language,
        )
        for item in yaml.safe_load(path.read_text(encoding="utf-8"))
        if item["language"] == language
    ]


def _model_queries(run: int, path: Path = MODEL_QUERIES) -> dict[str, str]:
    return {
        item["id"]: item["queries"][run - 1]
        for item in yaml.safe_load(path.read_text(encoding="utf-8"))
    }


def english_twin(source: str) -> str:
    """The English page a German manual page translates (same file name), else itself."""
    for german, english in _TWIN_FOLDERS.items():
        if source.startswith(german):
            return english + source.removeprefix(german)
    return source


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
        sources = [english_twin(passage.source) for passage in passages]
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
    # CPU time of this process per search: comparable on a busy machine, where wall time
    # mostly measures waiting for a core.
    search_cpu_p50_ms: float
    search_cpu_p95_ms: float

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
    search_cpu_ms: list[float] = []
    for _ in range(rounds):
        for query in queries:
            started = time.perf_counter()
            vector = kb.embedder.embed_new_query(query)
            embedded, cpu_started = time.perf_counter(), time.process_time()
            kb.search_by_vector(query, vector, k, collection=collection, language=language)
            finished, cpu_finished = time.perf_counter(), time.process_time()
            embed_ms.append((embedded - started) * 1000)
            search_ms.append((finished - embedded) * 1000)
            search_cpu_ms.append((cpu_finished - cpu_started) * 1000)
    return LatencyMeasurement(
        queries=len(search_ms),
        embed_p50_ms=percentile(embed_ms, 50),
        embed_p95_ms=percentile(embed_ms, 95),
        search_p50_ms=percentile(search_ms, 50),
        search_p95_ms=percentile(search_ms, 95),
        search_cpu_p50_ms=percentile(search_cpu_ms, 50),
        search_cpu_p95_ms=percentile(search_cpu_ms, 95),
    )


def percentile(values: list[float], percent: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]
