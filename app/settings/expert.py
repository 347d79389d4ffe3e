"""The web-research expert (`SUPPORTBOT_EXPERT__…`)."""

from pydantic import BaseModel, Field, SecretStr, field_validator

from knowledge.settings import web_address


class ExpertSettings(BaseModel):
    """The expert subagent (docs/expert.md): `ask_expert` is offered to the main model only
    when a search backend is set. Its model is `llm.expert_model`."""

    searxng_url: str | None = Field(
        None, description="SearxNG base URL with the JSON format enabled; wins over Tavily"
    )
    tavily_api_key: SecretStr | None = Field(
        None, description="Tavily API key: the hosted backend, used when no SearxNG URL is set"
    )
    tavily_url: str = Field("https://api.tavily.com/search", description="Tavily's endpoint")
    search_results: int = Field(5, gt=0, description="results one web_search call returns")
    max_steps: int = Field(6, gt=0, description="expert model calls per question")
    max_seconds: float = Field(60.0, gt=0, description="wall time per question")
    max_pages: int = Field(3, gt=0, description="fetch_page calls per question")
    max_page_chars: int = Field(6000, gt=0, description="characters of a page the model reads")
    max_facts: int = Field(5, gt=0, description="facts one answer carries at most")
    fetch_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="whole time to fetch one page (connect, headers, body, redirects); "
        "per read for web search",
    )
    max_download_bytes: int = Field(2_000_000, gt=0, description="bytes read of one page")
    allow_private_addresses: bool = Field(
        False, description="let fetch_page open loopback and private addresses (tests only)"
    )

    _http_addresses = field_validator("searxng_url", "tavily_url")(web_address)
