"""The knowledge base's settings (`SUPPORTBOT_KNOWLEDGE__…`): where Qdrant keeps it, how
it is chunked, embedded, searched, calibrated and synced. A group of the service's
settings (`app.settings.Settings.knowledge`), defined here so that `knowledge` reads its
own settings without importing the service."""

from pathlib import Path
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from knowledge.relevance import RelevanceThresholds


def web_address(url: str | None) -> str | None:
    """`url` when it is an http(s) address with a host (a field validator's body)."""
    if url:  # unset (None) or empty, as compose passes an unset variable
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http:// or https:// address with a host")
    return url


class DocumentationSource(BaseModel):
    """A folder or a help center that `supportbot serve` mirrors into a collection every
    `every_hours` (app/knowledge_sources)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is told, not ignored

    location: str = Field(
        min_length=1,
        description="a folder (relative: to SUPPORTBOT_HOME) or the http(s) URL of a help center",
    )
    collection: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the collection it goes into; unset: `knowledge.collection`",
    )
    every_hours: float = Field(gt=0, description="hours from the end of one sync to the next")

    @field_validator("location")
    @classmethod
    def _folder_or_site(cls, value: str) -> str:
        value = value.strip()
        if "://" in value:
            web_address(value)
        return value

    @property
    def is_site(self) -> bool:
        return self.location.startswith(("https://", "http://"))

    def under(self, home: Path) -> "DocumentationSource":
        """This source with a relative folder read from `home`."""
        if self.is_site:
            return self
        return self.model_copy(update={"location": str(home / Path(self.location).expanduser())})


# Fusion: cosine + keyword_weight × BM25 relative to the query's best passage. e5's cosines
# of the top passages lie within ~0.1 of each other, so 0.03 is "BM25 counts 30% of that".
DEFAULT_KEYWORD_WEIGHT = 0.03
# WordLlama adds static_weight × (its cosine's z-score over the passages): 0.005 makes two
# standard deviations worth a third of BM25's best. Chosen on the dev conversations.
DEFAULT_STATIC_WEIGHT = 0.005
# For a question in a language no page is written in: cosine + this × USE's cosine
# (`knowledge.crosslingual`). Chosen on the development and first held-out question sets of
# three corpora (docs/knowledge.md#your-documentation).
DEFAULT_CROSSLINGUAL_WEIGHT = 0.2


class KnowledgeSettings(BaseModel):
    """The knowledge base: where Qdrant keeps it, how it is chunked, embedded and searched."""

    qdrant_path: Path = Field(
        Path("./var/qdrant"),
        description="the embedded store's folder (Qdrant Edge; when no server is set)",
    )
    qdrant_url: str | None = Field(None, description="Qdrant server; the embedded store when unset")
    qdrant_api_key: SecretStr | None = Field(None, description="the Qdrant server's API key")
    collection: str = Field("kb", description="the collection the agent searches")
    sample_path: Path = Field(
        Path(__file__).resolve().parent / "sample_kb",
        description="the sample knowledge base `supportbot kb ingest-sample` ingests",
    )
    ingest_roots: list[Path] = Field(
        default_factory=list,
        description="folders `POST /v1/admin/kb/ingest` may read (symlinks out of them are "
        "refused); empty: the sample knowledge base folder only",
    )
    top_k: int = Field(4, description="passages one search_knowledge_base call returns")
    passages_per_page: int = Field(
        1, ge=1, description="passages of one page a search returns at most (more pages instead)"
    )
    result_token_budget: int = Field(1000, description="tokens one tool result may take")
    embedder: str = Field(
        "e5",
        description="`e5` (multilingual-e5-small, most products in int8), `e5-float` (its "
        "float graph) or `use` (multilingual Universal Sentence Encoder); see "
        "docs/knowledge.md",
    )
    model_cache_dir: Path | None = Field(
        None,
        description="where the embedder's built ONNX graph is kept between starts (rebuilt "
        "when the weights, the quantizer settings or onnxruntime change); unset: "
        "$XDG_CACHE_HOME/supportbot, by default ~/.cache/supportbot",
    )
    hybrid: bool = Field(False, description="fuse Qdrant's BM25 sparse hits with the dense ones")
    language: str = Field(
        "en",
        description="language of the collection's documentation (ISO 639-1): the search tool "
        "asks the model to query in it; a search takes its pages beside the query's",
    )
    keyword_weight: float = Field(
        DEFAULT_KEYWORD_WEIGHT,
        ge=0,
        description="weight of in-process BM25 (over the pages in the query's language; for "
        "a query in a language no page is in, over the documentation's pages on its words put "
        "into theirs) added to the dense score (0: dense only)",
    )
    static_weight: float = Field(
        DEFAULT_STATIC_WEIGHT,
        ge=0,
        description="weight of WordLlama (a static English embedder) added like BM25 for "
        "an English query (0: off)",
    )
    crosslingual_weight: float = Field(
        DEFAULT_CROSSLINGUAL_WEIGHT,
        ge=0,
        description="weight of the multilingual Universal Sentence Encoder's cosine added "
        "to the dense score for a query in a language no page is written in (0: off)",
    )
    min_similarity: dict[str, float] = Field(
        default_factory=dict,
        description="per embedder (`e5`) and per query language (`e5:ru`): the dense "
        "similarity below which a passage is not relevant; a search that finds none tells "
        "the model the documentation has nothing on it. A query in a language not listed gets "
        "the embedder's own. Empty (the default): the thresholds `kb ingest` calibrated on "
        "the collection itself (`supportbot kb stats` shows them); set it from labelled "
        "questions with `supportbot kb calibrate --questions`",
    )
    scope_questions: list[Path] = Field(
        default_factory=list,
        description="YAML files of questions labelled `docs: answerable | unanswerable` for "
        "this collection (`questions:` or `messages:` lists, as `supportbot insights "
        "questions` writes them): a question nearer the unanswerable ones "
        'than the answerable ones is told "not in the docs" even when a '
        "passage passes the similarity threshold (knowledge/scope.py); empty: the threshold "
        "alone. Calibrate with `supportbot kb calibrate --scope`",
    )
    scope_cut: float = Field(
        0.0,
        ge=-2,
        le=2,
        description="with `scope_questions`: a question is outside the documentation when "
        "its five nearest labelled unanswerable questions are nearer (mean cosine) than its "
        "five nearest answerable ones by more than this; `supportbot kb calibrate --scope` "
        "chooses it",
    )
    chunk_tokens: int = Field(350, description="token budget of one indexed passage")
    min_chunk_tokens: int = Field(
        30,
        description="smaller sections merge with a neighbour; each larger section is a "
        "passage of its own, so that a search finds the section that answers and the answer "
        "cites its heading",
    )
    embed_tokens: int = Field(128, description="leading tokens of a passage the embedder sees")
    public_base_urls: dict[str, str] = Field(
        default_factory=dict,
        description="collection (or `collection/folder/`) -> the public URL its sources are "
        "published under; a citation then links to base URL + the rest of its source path",
    )
    sync_max_pages: int = Field(
        5000, gt=0, description="pages one `supportbot kb sync` reads at most"
    )
    sync_timeout_seconds: float = Field(
        20.0,
        gt=0,
        description="whole time `kb sync` gives one page (connect, headers, body, redirects)",
    )
    sync_max_page_bytes: int = Field(
        20_000_000, gt=0, description="a larger page (or sitemap) is reported, not ingested"
    )
    sync_allow_private_addresses: bool = Field(
        False,
        description="let `kb sync` open loopback and private addresses (a help center on "
        "your own network; tests); off, a site resolving to one is refused as the web "
        "expert refuses it",
    )

    sources: list[DocumentationSource] = Field(
        default_factory=list,
        description="folders and help centers `supportbot serve` keeps in sync on a schedule, "
        'e.g. `[{"location": "https://help.example.com/docs/", "every_hours": 6}]`: '
        "`location` a folder (relative: to the home) or an http(s) URL, `collection` unset: "
        "`knowledge.collection`, `every_hours` (> 0) counted from the end of one sync; a "
        "folder is ingested again as `kb ingest` does, a site synced as `kb sync` does, by "
        "one replica at a time; `GET /v1/admin/kb/sources` shows how each went",
    )

    _http_addresses = field_validator("qdrant_url")(web_address)

    @field_validator("sources")
    @classmethod
    def _one_schedule_per_source(
        cls, sources: list[DocumentationSource], info: ValidationInfo
    ) -> list[DocumentationSource]:
        """Each source names its collection (the configured one when unset), once."""
        default = info.data.get("collection") or cls.model_fields["collection"].default
        named = [
            source if source.collection else source.model_copy(update={"collection": default})
            for source in sources
        ]
        seen: set[tuple[str | None, str]] = set()
        for source in named:
            if (source.collection, source.location) in seen:
                raise ValueError(
                    f"{source.location} is listed twice for the collection {source.collection!r}"
                )
            seen.add((source.collection, source.location))
        return named

    @property
    def configured_min_similarity(self) -> bool:
        """Whether `min_similarity` sets thresholds for the configured embedder."""
        prefix = f"{self.embedder}:"
        return any(key == self.embedder or key.startswith(prefix) for key in self.min_similarity)

    @property
    def relevance_thresholds(self) -> RelevanceThresholds:
        prefix = f"{self.embedder}:"
        return RelevanceThresholds(
            self.min_similarity.get(self.embedder, 0.0),
            {
                key.removeprefix(prefix): value
                for key, value in self.min_similarity.items()
                if key.startswith(prefix)
            },
            self.language,
        )

    @field_validator("public_base_urls")
    @classmethod
    def _web_addresses(cls, value: dict[str, str]) -> dict[str, str]:
        for key, url in value.items():
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"the public base URL of {key!r} is not an http(s) URL")
        return value

    def public_url(self, source: str) -> str | None:
        """Where a passage of the configured collection is published: the base URL of the
        longest matching key of `public_base_urls`, followed by the rest of the source path.
        None when nothing matches (the citation then shows its excerpt)."""
        if source.startswith(("https://", "http://")):
            return source
        path = f"{self.collection}/{source}"
        matching = [k for k in self.public_base_urls if path.startswith(k.rstrip("/") + "/")]
        if not matching:
            return None
        key = max(matching, key=len)
        rest = path[len(key.rstrip("/")) + 1 :]
        return self.public_base_urls[key].rstrip("/") + "/" + quote(rest)
