"""Builds the service's long-lived parts from settings, once per process; every adapter
(HTTP, Telegram, CLI, evals) uses the same `Runtime`."""

import asyncio
import ctypes
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import anyio
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.agent.expert.search import search_backend
from app.agent.lean import create_lean_agent
from app.agent.memory.cache_hints import ProviderCacheMiddleware
from app.agent.memory.middleware import MemoryMiddleware
from app.agent.memory.profiles import MemoryProfile
from app.agent.memory.recall import recall_history_tool
from app.agent.memory.results import ResultBudgetMiddleware
from app.agent.memory.state import MemoryContext
from app.agent.memory.summarizer import build_summary_model
from app.agent.models import (
    OFFLINE,
    StepLimitMiddleware,
    build_chat_model,
    model_fault_middleware,
    warm_up_chat_model,
    with_decider,
)
from app.agent.offline.passages import quotable
from app.agent.tools import knowledge_search_tool, tool_retry_middleware
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.db.engine import make_async_engine, make_session_factory
from app.decisions.decider import MessageDecider, decider_for
from app.handoff.service import HandoffService
from app.handoff.tool import request_human_tool
from app.memory.idle import IdleWriter
from app.observability.simulator import RULES, PrefixCacheSimulator
from app.observability.tracing import Tracer
from app.settings import AUDIENCES, KnowledgeSettings, Settings
from app.start_up_errors import InvalidSetting, one_line
from knowledge import stores
from knowledge.client import KnowledgeClient
from knowledge.embeddings import embedder_name
from knowledge.relevance import RelevanceThresholds
from knowledge.scope import DocumentationScope, documentation_scope
from knowledge.store import KnowledgeBase
from knowledge.tokens import count_tokens
from knowledge.types import Retriever

log = logging.getLogger(__name__)

# A question the start-up search asks, so that the first user's turn does not pay for
# building the BM25 index and loading WordLlama (they serve English questions).
WARM_UP_QUESTION = "How do I change my account settings?"


# The memory middleware of a profile that is not a `MemoryProfile` (the evals' peers on
# LangChain's own middleware), given the summary model.
MemoryFactory = Callable[[BaseChatModel], list[AgentMiddleware[Any, Any, Any]]]


def memory_middleware(
    profile: MemoryProfile, summarizer: BaseChatModel, recall: BaseTool
) -> list[AgentMiddleware[Any, Any, Any]]:
    memory: list[AgentMiddleware[Any, Any, Any]] = [MemoryMiddleware(profile, summarizer, recall)]
    if profile.results is not None:
        memory.append(ResultBudgetMiddleware(profile.results))
    return memory


def relevance_in_force(
    knowledge: KnowledgeSettings, retriever: Retriever
) -> Callable[[], RelevanceThresholds | None] | None:
    """The thresholds a search applies: the configured `min_similarity` for the embedder
    when set, else the calibration stored with the searched collection (made at ingest);
    none (every passage found is passed on) for a retriever that keeps no calibration."""
    configured = knowledge.relevance_thresholds
    if knowledge.configured_min_similarity:
        return lambda: configured
    if not isinstance(retriever, KnowledgeBase):
        return None
    language = knowledge.language

    def calibrated() -> RelevanceThresholds | None:
        calibration = retriever.calibration()
        return calibration.relevance(language) if calibration else None

    return calibrated


def agent_factory(
    settings: Settings,
    model: BaseChatModel,
    retriever: Retriever,
    summary_model: BaseChatModel | None = None,
    expert_model: BaseChatModel | None = None,
    other_memory: Mapping[str, MemoryFactory] | None = None,
    scope: DocumentationScope | None = None,
    decider: MessageDecider | None = None,
) -> Any:
    """One compiled agent per memory profile, built on first use; a profile named in
    `other_memory` gets that middleware instead of `MemoryMiddleware`; `scope`: what the
    collection's documentation covers (knowledge/scope.py), for its search tool;
    `decider`: the service's, for an offline fallback model."""
    knowledge = settings.knowledge
    offline = settings.llm.model == OFFLINE
    search = partial(
        knowledge_search_tool,
        retriever,
        knowledge.top_k,
        language=knowledge.language,
        relevance=relevance_in_force(knowledge, retriever),
        scope=scope,
        # A model reads the passages it is handed; the offline model quotes them as they
        # stand, so it is handed only those that hold every word asked (evidence.py) and
        # have a sentence, step or row to quote.
        quotable=quotable if offline else None,
    )
    # A profile with a results policy has ResultBudgetMiddleware render the passages under
    # its budget: its search leaves them unrendered rather than render them twice.
    searches = {False: search(knowledge.result_token_budget), True: search(None)}
    tools: list[BaseTool] = []
    if search_backend(settings.expert) is not None:  # web research loads only when offered
        from app.agent.expert.agent import ask_expert_tool

        if expert := ask_expert_tool(settings, expert_model):
            tools.append(expert)
    summarizer = summary_model or build_summary_model(settings.llm)
    recall = recall_history_tool(
        settings.profiles.recall_results, settings.profiles.recall_token_budget
    )

    # Offered to a real model, for the audiences handed to a person (app/handoff); the
    # offline model never calls it (a keyword rule stands in), so it is not sent the tool.
    by_audience = settings.profiles.by_audience
    handing_over = {by_audience[audience] for audience in settings.handoff.audiences}
    if offline:
        handing_over.clear()
    request_human = request_human_tool()

    # Shared by every profile: they hold settings only, no per-conversation state.
    step_limit = StepLimitMiddleware(settings.llm.max_agent_steps)
    model_faults = model_fault_middleware(settings.llm, decider)
    tool_retries = tool_retry_middleware(settings.llm)

    @cache
    def agent_for_profile(profile: str) -> Runnable[Any, Any]:
        own = other_memory is None or profile not in other_memory
        memory = (
            memory_middleware(settings.profiles.definitions[profile], summarizer, recall)
            if own
            else other_memory[profile](summarizer)  # type: ignore[index]
        )
        shaped = own and settings.profiles.definitions[profile].results is not None
        profile_tools = [searches[shaped], *tools]
        # Listed outermost first. The step limit counts model-node runs, so retries and
        # fallbacks inside one step do not use up steps. Memory shapes the request once,
        # so every retry and the fallback send the same context. Fallback wraps retry wraps
        # the Retry-After wait: each model gets its retries, the fallback only a failure
        # that outlasted them. Cache hints come last, for the model actually called (a
        # fallback may be another provider). Tool retries wrap tool calls only.
        middleware: list[AgentMiddleware[Any, Any, Any]] = [
            step_limit,
            *memory,
            *model_faults,
            ProviderCacheMiddleware(settings.observability.simulator_rules),
            *tool_retries,
        ]
        return create_lean_agent(
            model,
            tools=[*profile_tools, request_human] if profile in handing_over else profile_tools,
            system_prompt=settings.chat.system_prompt,
            middleware=middleware,
            context_schema=MemoryContext,
        )

    return agent_for_profile


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    knowledge_client: KnowledgeClient  # held from start to `aclose`
    knowledge: KnowledgeBase
    tracer: Tracer
    chat: ChatService
    agents: Callable[[str], Runnable[Any, Any]]  # the compiled agent of a memory profile
    decider: MessageDecider  # what a message is (app/decisions)
    idle: IdleWriter  # people's memory written when a conversation goes idle
    model: BaseChatModel | None = None  # the agents' model (`warm_up` readies its parsing)
    scope: DocumentationScope | None = None  # what the documentation covers (fitted in `warm_up`)
    _idle_checks: "asyncio.Task[None] | None" = field(default=None, init=False)
    # The periodic close of orphaned turns (`sweep_periodically`).
    _sweep: "asyncio.Task[None] | None" = field(default=None, init=False)
    _warming: "asyncio.Future[None] | None" = field(default=None, init=False)  # `start`

    @classmethod
    def from_settings(cls, settings: Settings) -> "Runtime":
        warn_if_pool_queues_chats(settings)
        try:
            embedder_name(settings.knowledge.embedder)  # a name nothing provides, before loading
        except ValueError as unknown:
            raise InvalidSetting("SUPPORTBOT_KNOWLEDGE__EMBEDDER", str(unknown)) from None
        engine = make_async_engine(settings.db)
        sessions = make_session_factory(engine)
        knowledge_client = stores.acquire(settings.knowledge)
        knowledge = KnowledgeBase.over(knowledge_client, settings.knowledge)
        model = build_chat_model(settings.llm.model, settings.llm, client_retries=0)
        decider = decider_for(
            settings.knowledge.embedder, settings.decisions, settings.knowledge.model_cache_dir
        )
        model = with_decider(model, decider)  # small talk and languages: the same decider
        tracer = Tracer.from_settings(settings)
        turns = TurnStore.for_engine(engine, settings.db)
        scope = documentation_scope(settings.knowledge, knowledge.embedder)
        agents = agent_factory(settings, model, knowledge, scope=scope, decider=decider)
        chat = ChatService(
            settings,
            turns,
            agents,
            tracer=tracer,
            simulator=PrefixCacheSimulator(RULES[settings.observability.simulator_rules]),
            handoffs=HandoffService(settings, turns, tracer=tracer, decider=decider),
        )
        idle = IdleWriter(settings, sessions, build_summary_model(settings.llm))
        return cls(
            settings,
            engine,
            sessions,
            knowledge_client,
            knowledge,
            tracer,
            chat,
            agents,
            decider,
            idle,
            model,
            scope,
        )

    async def start(self, *, warm_in_background: bool = False) -> None:
        """Once per process, before serving: close the turns a stopped process left
        `running`, start the checks for idle conversations, and load what the first turn
        would otherwise wait for (`warm_up`). A database that is down now is reported by
        readiness, not fatal here. With `warm_in_background` (the HTTP server) the loading
        goes on while the server starts answering: `/healthz` at once, `/readyz` once
        `warmed_up`."""
        try:
            await self.chat.close_orphaned_turns()
        except SQLAlchemyError as error:
            log.warning("could not close turns left running: %s", one_line(error))
        if self.settings.memory.idle_check_seconds:
            self._idle_checks = asyncio.create_task(self.idle.run())
        # On anyio's worker threads, as the HTTP server runs its own blocking work: its
        # asyncio backend (75 ms of imports) then loads here, not on the first request.
        self._warming = asyncio.ensure_future(anyio.to_thread.run_sync(self.warm_up))
        if warm_in_background:
            self._warming.add_done_callback(_log_failed_warm_up)
        else:
            await self._warming

    @property
    def warmed_up(self) -> bool:
        """What the first turn needs is loaded (a failure to load it leaves this False)."""
        warming = self._warming
        if warming is None or not warming.done() or warming.cancelled():
            return False
        return warming.exception() is None

    def sweep_periodically(self) -> None:
        """Close turns a gone process left `running` every `chat.orphan_sweep_seconds`, on
        the running event loop (the one that serves turns), until `aclose`."""
        every = self.settings.chat.orphan_sweep_seconds
        if every > 0 and self._sweep is None:
            self._sweep = asyncio.create_task(self.chat.sweep_orphans(every))

    def warm_up(self) -> None:
        """The tokenizer's tables, the embedder (e5's graph and tokenizer, loaded by the
        decider's first reading: not before the port answers, ~0.5 s), the audiences'
        compiled agents, LangChain's callback set-up, the decider's classifier (fitted on
        its examples), the documentation's scope (fitted on its questions, when
        configured), the language model, the
        chat model's reply parsing (an OpenAI-compatible endpoint's), and one search (the
        BM25 index of the collection and WordLlama are built on the first), with what a
        question in a language no page is written in needs (`KnowledgeBase.warm_up`).
        A failure is logged: the first turn then loads what is missing, as it would
        without this."""
        started = time.perf_counter()
        count_tokens(WARM_UP_QUESTION)
        self.decider.decide(WARM_UP_QUESTION)
        if self.scope is not None:
            self.scope.warm()
        RunnableLambda(len).invoke(WARM_UP_QUESTION)  # imports the tracers' context modules
        for audience in AUDIENCES:
            self.agents(self.settings.profiles.by_audience[audience])
        if self.model is not None:
            warm_up_chat_model(self.model)
        try:
            self.knowledge.warm_up(WARM_UP_QUESTION, self.settings.knowledge.top_k)
        except Exception as error:  # a store that is down is reported by readiness
            log.warning("start-up search failed, the first turn builds its indexes: %s", error)
        release_freed_memory()
        log.info("loaded what the first turn needs in %.2f s", time.perf_counter() - started)

    async def database_ready(self) -> bool:
        try:
            async with self.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    async def aclose(self) -> None:
        if self._idle_checks is not None:
            self._idle_checks.cancel()
            with suppress(asyncio.CancelledError):
                await self._idle_checks
        if self._sweep is not None:
            self._sweep.cancel()
        if self._warming is not None and not self._warming.done():
            await asyncio.wait([self._warming])  # a thread: its end, before the store closes
        await self.chat.aclose()
        self.tracer.close()
        self.knowledge_client.release()
        await self.engine.dispose()


def _log_failed_warm_up(warming: "asyncio.Future[None]") -> None:
    if not warming.cancelled() and (error := warming.exception()) is not None:
        log.error("start-up could not load what the first turn needs: %r", error)


def release_freed_memory() -> None:
    """Give the memory start-up allocated and freed (model files read, graphs and indexes
    built) back to the system: glibc's allocator keeps freed heap for reuse, tens of MB
    here. Nothing where the C library has no `malloc_trim` (musl, macOS)."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


def warn_if_pool_queues_chats(settings: Settings) -> None:
    """Each running turn holds one pooled connection: with fewer connections than the bot
    serves chats at once, the others wait for a free one (in order, without failing)."""
    turns = settings.db.turn_connections
    telegram = settings.telegram
    if telegram.token is not None and telegram.concurrent_chats > turns:
        log.warning(
            "telegram.concurrent_chats is %d but the database pool (db.pool_size %d + "
            "db.max_overflow %d, one kept free) runs %d turns at once: the others wait; "
            "raise SUPPORTBOT_DB__POOL_SIZE or SUPPORTBOT_DB__MAX_OVERFLOW",
            telegram.concurrent_chats,
            settings.db.pool_size,
            settings.db.max_overflow,
            turns,
        )
