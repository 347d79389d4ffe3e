"""Chat model selection: the offline model, any init_chat_model provider, or an
OpenAI-compatible endpoint (OpenRouter, Ollama, vLLM, llama.cpp server)."""

from typing import Any

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI

from app.agent.offline import OfflineChatModel
from app.settings import LLMSettings

OFFLINE = "offline"


def build_chat_model(name: str, llm: LLMSettings) -> BaseChatModel:
    """`name` is `offline`, a `provider:model` spec, or a model served at `llm.base_url`."""
    if name == OFFLINE:
        return OfflineChatModel()
    api_key = llm.api_key.get_secret_value() if llm.api_key else None
    if llm.base_url:
        return ChatOpenAI(
            model=name,
            base_url=llm.base_url,
            api_key=api_key,
            temperature=llm.temperature,
            timeout=llm.timeout_seconds,
            stream_usage=True,
        )
    extra: dict[str, Any] = {"api_key": api_key} if api_key else {}
    return init_chat_model(name, temperature=llm.temperature, timeout=llm.timeout_seconds, **extra)
