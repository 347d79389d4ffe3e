"""`supportbot bench load`: the service on 127.0.0.1 under concurrent conversations, then
every conversation read back to count what was lost, left running or stored out of order.

The app runs in a child process (its own interpreter, so the load generator does not
share its CPU lock) on a socket this process bound to a free loopback port. The model is
the offline one, or, with a fault rate, the scripted OpenAI-compatible provider failing
that share of calls. Conversations run concurrently, each one's turns in order; the run is
bounded by its turn count and by a time limit after which no turn is started. One module:
the child server, the load and the read-back are one benchmark run.
"""

import asyncio
import itertools
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import func, select

from app.db.engine import make_async_engine
from app.db.models import Conversation, LLMCall, Turn
from app.settings import DbSettings

QUESTIONS = (
    "How do I create an invoice?",
    "How can I record a payment from a customer?",
    "Which tax rates can I set up, and where?",
    "How do I import my bank statement?",
    "How do I reconcile the bank account?",
    "Can I change how invoices are numbered?",
    "How do I send a payment reminder?",
    "How do I issue a credit note or a refund?",
    "Which reports are there?",
    "How do I add a user with fewer rights?",
)

# HTTP outcomes of one turn. A documented failure (502) says the message was kept; a refusal
# (4xx) says it was not; anything else leaves the client guessing.
ANSWERED, FAILED, REFUSED, ERROR, TIMEOUT = "answered", "failed", "refused", "error", "timeout"


@dataclass(frozen=True)
class LoadPlan:
    conversations: int = 50
    turns: int = 20
    concurrency: int = 20  # conversations in flight at once
    fail_rate: float | None = None  # None: the offline model; else the scripted provider's
    time_limit_seconds: float = 900.0  # no turn starts later
    turn_timeout_seconds: float = 120.0  # one HTTP request, reading the reply included
    model_timeout_seconds: float = 5.0  # the service's timeout for one scripted call
    api_key: str | None = None  # sent as a bearer token when the API wants one
    seed: int = 0


@dataclass
class SentTurn:
    key: str
    conversation: int
    index: int  # the order this conversation sent it in, from 0
    text: str
    outcome: str
    status: str  # the HTTP status code, or the client's error when there was no response
    seconds: float


@dataclass
class Model:
    """The model the service calls, and which turns met a model fault (by tag)."""

    name: str
    requests: int = 0  # that reached the provider, retries included
    faults: Counter[str] = field(default_factory=Counter)  # by kind
    faulted: set[tuple[int, int]] = field(default_factory=set)  # (conversation, turn index)


@dataclass
class StoredState:
    """What the service kept, read back after the load."""

    user_messages: dict[str, list[tuple[int, int, str]]]  # key -> (seq, turn, text) by seq
    unreadable: dict[str, int]  # key -> HTTP status of a read that failed
    turn_status: Counter[str] = field(default_factory=Counter)
    model_ms: dict[tuple[str, int], int] = field(default_factory=dict)  # (key, turn) -> ms
    turn_ms: dict[tuple[str, int], float] = field(default_factory=dict)  # as the service timed it


@dataclass(frozen=True)
class LoadReport:
    plan: LoadPlan
    database: str
    model: str
    model_requests: int  # scripted provider only
    model_faults: Counter[str]
    wall_seconds: float
    planned: int
    outcomes: Counter[str]
    statuses: Counter[str]  # HTTP status codes, or the client's error without a response
    turn_status: Counter[str]  # as stored
    lost: int  # sent, not refused, not stored
    duplicated: int  # stored more than once
    order_violations: int
    unreadable: int  # conversations the read-back could not get
    latency_ms: list[float]  # answered turns
    faulted_answers: int  # answered turns that met a model fault on the way
    overhead_ms: list[float]  # answered turns without a fault: latency minus model time
    outside_turn_ms: list[float]  # the same turns: latency minus the service's turn time

    @property
    def sent(self) -> int:
        return sum(self.outcomes.values())

    def lines(self) -> list[str]:
        plan = self.plan
        statuses = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        stored = ", ".join(f"{status} {n}" for status, n in sorted(self.turn_status.items()))
        faults = ", ".join(f"{kind}: {n}" for kind, n in sorted(self.model_faults.items()))
        provider = [
            f"provider: {self.model_requests} requests, "
            f"{self.model_faults.total()} faulted ({faults or '-'})"
        ]
        unsent = (
            f" (the {plan.time_limit_seconds:.0f} s limit passed)"
            if self.sent < self.planned
            else ""
        )
        return [
            f"{plan.conversations} conversations × {plan.turns} turns, {plan.concurrency} at "
            f"once, {self.model}, {self.database}: {self.wall_seconds:.0f} s",
            f"turns sent {self.sent} of {self.planned}{unsent}",
            f"replies: answered {self.outcomes[ANSWERED]}, failed as documented (502) "
            f"{self.outcomes[FAILED]}, refused (4xx) {self.outcomes[REFUSED]}, other errors "
            f"{self.outcomes[ERROR]}, no reply in {plan.turn_timeout_seconds:.0f} s "
            f"{self.outcomes[TIMEOUT]}  (HTTP {statuses or '-'})",
            *(provider if self.model_requests else []),
            f"stored turns: {stored or '-'}; stuck running: {self.turn_status['running']}",
            f"lost user messages (sent, not refused, not stored): {self.lost}; stored twice: "
            f"{self.duplicated}; conversations unreadable: {self.unreadable}",
            f"order violations: {self.order_violations}",
            f"latency of answered turns: {_percentiles(self.latency_ms)}",
            f"service overhead per answered turn without a model fault (latency minus the "
            f"model calls' time; {self.faulted_answers} answered after a fault left out): "
            f"{_percentiles(self.overhead_ms)}",
            f"  of which outside the stored turn (HTTP, queueing, lock wait): "
            f"{_percentiles(self.outside_turn_ms)}",
        ]


def _percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.0f} ms (one turn)"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {cuts[49]:.0f} ms, p95 {cuts[94]:.0f} ms (n={len(values)})"


_TAG = re.compile(r"\[load c(?P<conversation>\d+) t(?P<index>\d+)\]")


def question(conversation: int, index: int) -> str:
    """A support question, tagged so the read-back finds exactly this turn's message."""
    return f"{QUESTIONS[(conversation + index) % len(QUESTIONS)]} [load c{conversation} t{index}]"


def _outcome(status: int) -> str:
    if status == 200:
        return ANSWERED
    if status == 502:
        return FAILED
    return REFUSED if 400 <= status < 500 else ERROR


async def _converse(
    client: httpx.AsyncClient,
    key: str,
    number: int,
    plan: LoadPlan,
    deadline: float,
    slots: asyncio.Semaphore,
) -> list[SentTurn]:
    sent: list[SentTurn] = []
    async with slots:
        for index in range(plan.turns):
            if time.monotonic() >= deadline:
                break
            text = question(number, index)
            body = {"audience": "client", "author": f"load user {number}", "text": text}
            started = time.perf_counter()
            try:
                response = await client.post(f"/v1/conversations/{key}/messages", json=body)
                status, outcome = str(response.status_code), _outcome(response.status_code)
            except httpx.TimeoutException as error:
                status, outcome = type(error).__name__, TIMEOUT
            except httpx.HTTPError as error:
                status, outcome = type(error).__name__, ERROR
            seconds = time.perf_counter() - started
            sent.append(SentTurn(key, number, index, text, outcome, status, seconds))
    return sent


async def drive(base_url: str, keys: list[str], plan: LoadPlan) -> list[SentTurn]:
    """Every conversation's turns over HTTP, `plan.concurrency` conversations at a time."""
    deadline = time.monotonic() + plan.time_limit_seconds
    slots = asyncio.Semaphore(plan.concurrency)
    async with _client(base_url, plan) as client:
        per_conversation = await asyncio.gather(
            *(_converse(client, key, n, plan, deadline, slots) for n, key in enumerate(keys))
        )
    return [turn for turns in per_conversation for turn in turns]


def _client(base_url: str, plan: LoadPlan) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
    return httpx.AsyncClient(
        base_url=base_url,
        headers=headers,
        timeout=plan.turn_timeout_seconds,
        limits=httpx.Limits(max_connections=plan.concurrency + 4),
    )


async def read_back(base_url: str, keys: list[str], plan: LoadPlan) -> StoredState:
    """Every conversation's stored user messages, as the API returns them."""
    state = StoredState(user_messages={}, unreadable={})
    async with _client(base_url, plan) as client:
        for key in keys:
            response = await client.get(f"/v1/conversations/{key}")
            if response.status_code != 200:
                state.unreadable[key] = response.status_code
                continue
            messages = sorted(response.json()["messages"], key=lambda m: m["seq"])
            state.user_messages[key] = [
                (m["seq"], m["turn"], m["content"]) for m in messages if m["role"] == "user"
            ]
    return state


async def _running_turns(database_url: str, keys: list[str]) -> int:
    engine = make_async_engine(DbSettings(url=database_url))
    try:
        async with engine.connect() as connection:
            query = (
                select(func.count())
                .select_from(Turn)
                .join(Conversation, Conversation.id == Turn.conversation_id)
                .where(Conversation.key.in_(keys), Turn.status == "running")
            )
            return int((await connection.execute(query)).scalar_one())
    finally:
        await engine.dispose()


async def settle(database_url: str, keys: list[str], seconds: float) -> None:
    """Wait up to `seconds` for turns the service is still working on (a client that timed
    out does not stop the turn) so that only turns left running count as stuck."""
    deadline = time.monotonic() + seconds
    while await _running_turns(database_url, keys) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)


async def read_turns(database_url: str, keys: list[str], state: StoredState) -> None:
    """Each turn's stored status, model time and duration, from the service's database."""
    engine = make_async_engine(DbSettings(url=database_url))
    try:
        async with engine.connect() as connection:
            turns = await connection.execute(
                select(
                    Conversation.key, Turn.number, Turn.status, Turn.started_at, Turn.finished_at
                )
                .join(Conversation, Conversation.id == Turn.conversation_id)
                .where(Conversation.key.in_(keys))
            )
            for key, number, status, started, finished in turns:
                state.turn_status[status] += 1
                if finished is not None:
                    state.turn_ms[key, number] = (finished - started).total_seconds() * 1000
            calls = await connection.execute(
                select(Conversation.key, LLMCall.turn, func.sum(LLMCall.latency_ms))
                .join(Conversation, Conversation.id == LLMCall.conversation_id)
                .where(Conversation.key.in_(keys))
                .group_by(Conversation.key, LLMCall.turn)
            )
            state.model_ms = {(key, turn): int(ms) for key, turn, ms in calls}
    finally:
        await engine.dispose()


def analyse(
    plan: LoadPlan,
    sent: list[SentTurn],
    state: StoredState,
    *,
    database: str,
    model: Model,
    wall_seconds: float,
) -> LoadReport:
    lost = duplicated = violations = 0
    latency, overhead, outside = [], [], []
    faulted_answers = 0
    for key, turns in _by_key(sent).items():
        stored = state.user_messages.get(key, [])
        found: dict[int, list[tuple[int, int]]] = {}  # sent index -> [(seq, turn number)]
        for seq, number, text in stored:
            if tag := _TAG.search(text):
                found.setdefault(int(tag["index"]), []).append((seq, number))
        for turn in turns:
            places = found.get(turn.index, [])
            lost += not places and turn.outcome != REFUSED
            duplicated += max(0, len(places) - 1)
            if turn.outcome != ANSWERED or not places:
                continue
            milliseconds = turn.seconds * 1000
            latency.append(milliseconds)
            if (turn.conversation, turn.index) in model.faulted:
                faulted_answers += 1  # its time includes failed calls and the retries' waits
                continue
            number = places[0][1]
            overhead.append(milliseconds - state.model_ms.get((key, number), 0))
            if (key, number) in state.turn_ms:
                outside.append(milliseconds - state.turn_ms[key, number])
        # Stored in the order sent, and turn numbers growing with the message order.
        in_order = sorted((places[0], index) for index, places in found.items())
        violations += sum(
            1
            for (before, first), (after, second) in itertools.pairwise(in_order)
            if second < first or after[1] <= before[1]
        )
    return LoadReport(
        plan=plan,
        database=database,
        model=model.name,
        model_requests=model.requests,
        model_faults=model.faults,
        wall_seconds=wall_seconds,
        planned=plan.conversations * plan.turns,
        outcomes=Counter(turn.outcome for turn in sent),
        statuses=Counter(turn.status for turn in sent),
        turn_status=state.turn_status,
        lost=lost,
        duplicated=duplicated,
        order_violations=violations,
        unreadable=len(state.unreadable),
        latency_ms=latency,
        faulted_answers=faulted_answers,
        overhead_ms=overhead,
        outside_turn_ms=outside,
    )


def _by_key(sent: list[SentTurn]) -> dict[str, list[SentTurn]]:
    grouped: dict[str, list[SentTurn]] = {}
    for turn in sent:
        grouped.setdefault(turn.key, []).append(turn)
    return grouped


@dataclass(frozen=True)
class Server:
    base_url: str
    pid: int
    startup_seconds: float  # from starting the process to its first answer to /healthz
    ready_seconds: float  # ... to its first 200 from /readyz (what the first turn needs loaded)


@contextmanager
def served(
    environment: Mapping[str, str], startup_seconds: float = 120.0, source: Path | None = None
) -> Iterator[Server]:
    """The app in a child process on a free 127.0.0.1 port; `source`: the checkout its code
    is imported from (another revision's), this one's by default."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "app.bench.child", str(listener.fileno())],
        env={**os.environ, **environment},
        pass_fds=(listener.fileno(),),
        cwd=source,  # `-m` puts the working directory first on the import path
    )
    listener.close()  # the child holds it now
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(f"{base_url}/healthz", child, startup_seconds)
        up = time.perf_counter() - started
        _wait_until_up(f"{base_url}/readyz", child, startup_seconds)
        yield Server(base_url, child.pid, up, time.perf_counter() - started)
    finally:
        child.terminate()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _wait_until_up(url: str, child: subprocess.Popen[bytes], seconds: float) -> None:
    """Until `url` answers 200."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"the service exited with {child.returncode} while starting")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the service did not answer {url} within {seconds:.0f} s")


def service_environment(database_url: str, index: Path) -> dict[str, str]:
    """Settings for the served app: this database, this knowledge index, no tracing, and
    HTTP rate limits out of the way (the load is one caller sending turns back to back)."""
    return {
        "SUPPORTBOT_DB__URL": database_url,
        "SUPPORTBOT_API__CONVERSATION_RATE": "1000/second",
        "SUPPORTBOT_API__CALLER_RATE": "1000/second",
        "SUPPORTBOT_API__CALLER_TOKEN_BUDGET": "1000000000/day",
        "SUPPORTBOT_KNOWLEDGE__QDRANT_PATH": str(index),
        "SUPPORTBOT_KNOWLEDGE__QDRANT_URL": "",
        "SUPPORTBOT_LANGFUSE__ENABLED": "false",
    }


def run(plan: LoadPlan, database_url: str, index: Path, settle_seconds: float = 30.0) -> LoadReport:
    """The whole benchmark against an already migrated database and an ingested index."""
    keys = [f"api:bench-{uuid.uuid4().hex[:8]}-{n}" for n in range(plan.conversations)]
    environment = service_environment(database_url, index)
    database = database_url.split(":", 1)[0].split("+", 1)[0]
    with _model(plan, environment) as model, served(environment) as server:
        base_url = server.base_url
        started = time.perf_counter()
        sent = asyncio.run(drive(base_url, keys, plan))
        wall_seconds = time.perf_counter() - started
        asyncio.run(settle(database_url, keys, settle_seconds))
        state = asyncio.run(read_back(base_url, keys, plan))
    asyncio.run(read_turns(database_url, keys, state))
    return analyse(plan, sent, state, database=database, model=model, wall_seconds=wall_seconds)


@contextmanager
def _model(plan: LoadPlan, environment: dict[str, str]) -> Iterator[Model]:
    """Starts the model the service calls and adds its settings to `environment`; its
    `faulted` turns are known once the block is left."""
    if plan.fail_rate is None:
        yield Model("offline model")
        return
    from app.bench.scripted_llm import ScriptedLLM, message_text

    scripted = ScriptedLLM(
        fault_rate=plan.fail_rate, seed=plan.seed, hang_seconds=plan.model_timeout_seconds + 1
    )
    model = Model(f"scripted provider failing {plan.fail_rate:.0%} of calls")
    with scripted as base_url:
        environment.update(
            {
                "SUPPORTBOT_LLM__MODEL": "scripted",
                "SUPPORTBOT_LLM__BASE_URL": base_url,
                "SUPPORTBOT_LLM__API_KEY": "bench",
                "SUPPORTBOT_LLM__TIMEOUT_SECONDS": str(plan.model_timeout_seconds),
            }
        )
        yield model
    model.requests = len(scripted.received)
    model.faults = Counter(str(r.fault) for r in scripted.received if r.fault is not None)
    for received in scripted.received:
        users = [m for m in received.body.get("messages", []) if m.get("role") == "user"]
        if received.fault is not None and users and (tag := _TAG.search(message_text(users[-1]))):
            model.faulted.add((int(tag["conversation"]), int(tag["index"])))
