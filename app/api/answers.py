"""Answers from the support team over HTTP, for the staff pages (app/widget/answers.html,
the queue's "Save as answer", Insights' "Write the answer"): list, create, read, edit,
delete. Staff credentials only: an API key gets 403, no credentials 401, before anything
of the request is read. The rest: app/answers/service.py."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, status
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, computed_field

from app.answers.service import AnswerDraft, AnswerService
from app.api.auth import StaffDep, StaffFirst, require_staff
from app.api.deps import RuntimeDep
from app.api.errors import documented
from app.api.schemas import UtcDatetime
from app.chat.text import normalize_text
from app.db.models import Answer
from knowledge.loaders import KNOWN_LANGUAGES
from knowledge.team_answers import source_of


def answer_service(runtime: RuntimeDep) -> AnswerService:
    return AnswerService.configured(runtime.sessions, runtime.knowledge, runtime.settings.knowledge)


Answers = Annotated[AnswerService, Depends(answer_service)]
AnswerId = Annotated[int, Path(ge=1, le=2**31 - 1)]
MessageId = Annotated[int, Path(ge=1, le=2**31 - 1, description="a transcript message's `id`")]
COLLECTION = r"^[A-Za-z0-9_-]{1,64}$"

router = APIRouter(
    prefix="/v1/answers",
    tags=["answers"],
    dependencies=[Depends(require_staff)],
    route_class=StaffFirst,
)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("it is empty")
    return value.strip()


def _known(codes: list[str]) -> list[str]:
    unknown = [code for code in codes if code.lower() not in KNOWN_LANGUAGES]
    if unknown:
        raise ValueError(f"unknown language codes {unknown}: ISO 639-1, e.g. en, de, ru")
    return [code.lower() for code in codes]


# Lengths count the text as sent, as the schema states them: checked before the cleaning.
Wording = Annotated[str, StringConstraints(max_length=1000), AfterValidator(normalize_text)]
Question = Annotated[Wording, AfterValidator(_not_blank)]
AnswerText = Annotated[
    str,
    StringConstraints(max_length=8192),
    AfterValidator(normalize_text),
    AfterValidator(_not_blank),
]
Languages = Annotated[list[str], Field(max_length=8), AfterValidator(_known)]
Collection = Annotated[str, StringConstraints(pattern=COLLECTION)]


class AnswerIn(BaseModel):
    question: Question = Field(description="the customer's question, as they would ask it")
    variants: list[Wording] = Field(
        default_factory=list, max_length=50, description="other wordings of the question"
    )
    answer: AnswerText = Field(description="Markdown, quoted whole by the offline model")
    languages: Languages = Field(
        default_factory=list,
        description="ISO 639-1 codes of the answer's text, the first its own; read from the "
        "text when empty",
    )
    enabled: bool = True
    collection: Collection | None = Field(None, description="the configured one when unset")


class AnswerPatch(BaseModel):
    """The fields to change; the others stay."""

    question: Question | None = None
    variants: list[Wording] | None = Field(None, max_length=50)
    answer: AnswerText | None = None
    languages: Languages | None = None
    enabled: bool | None = None
    collection: Collection | None = None


class AnswerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)  # read from the `answers` row

    id: int
    question: str
    variants: list[str]
    answer: str
    author: str | None
    languages: list[str]
    enabled: bool
    collection: str
    created_at: UtcDatetime
    updated_at: UtcDatetime

    @computed_field(description="what its citations name: answers/<id>")  # type: ignore[prop-decorator]
    @property
    def source(self) -> str:
        return source_of(self.id)


def found(row: Answer | None, answer_id: int) -> Answer:
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no answer {answer_id}")
    return row


@router.get("", responses=documented(401, 403, 422))
async def list_answers(
    answers: Answers,
    collection: Annotated[Collection | None, Query()] = None,
    enabled: Annotated[bool | None, Query(description="only enabled, or only disabled")] = None,
) -> list[AnswerOut]:
    """The team's answers, the newest first."""
    return [AnswerOut.model_validate(row) for row in await answers.listed(collection, enabled)]


@router.post("", status_code=status.HTTP_201_CREATED, responses=documented(400, 401, 403, 413, 422))
async def create_answer(body: AnswerIn, answers: Answers, caller: StaffDep) -> AnswerOut:
    """Save an answer; when enabled it is in the knowledge base before this returns."""
    draft = AnswerDraft(
        question=body.question,
        answer=body.answer,
        variants=body.variants,
        languages=body.languages,
        enabled=body.enabled,
        collection=body.collection,
        author=caller.name,
    )
    return AnswerOut.model_validate(await answers.create(draft))


class DraftOut(BaseModel):
    question: str = Field(description="the customer's question before the reply; may be empty")
    answer: str = Field(description="the staff reply")


@router.get("/draft/{message_id}", responses=documented(401, 403, 404, 422))
async def draft_answer(message_id: MessageId, answers: Answers) -> DraftOut:
    """A staff reply of a transcript drafted as an answer, for the queue's "Save as
    answer": the reply, and the customer's last question before it (one the bot searched
    the documentation for, or held for staff; else their last message)."""
    draft = await answers.drafted(message_id)
    if draft is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"message {message_id} is no staff reply")
    return DraftOut(question=draft.question, answer=draft.answer)


@router.get("/{answer_id}", responses=documented(401, 403, 404, 422))
async def get_answer(answer_id: AnswerId, answers: Answers) -> AnswerOut:
    return AnswerOut.model_validate(found(await answers.get(answer_id), answer_id))


@router.patch("/{answer_id}", responses=documented(400, 401, 403, 404, 413, 422))
async def edit_answer(answer_id: AnswerId, body: AnswerPatch, answers: Answers) -> AnswerOut:
    """Change an answer: indexed again at once; `enabled: false` takes it out of the
    knowledge base, `true` puts it back."""
    changes: dict[str, Any] = body.model_dump(exclude_unset=True, exclude_none=True)
    return AnswerOut.model_validate(found(await answers.update(answer_id, changes), answer_id))


@router.delete(
    "/{answer_id}", status_code=status.HTTP_204_NO_CONTENT, responses=documented(401, 403, 404, 422)
)
async def delete_answer(answer_id: AnswerId, answers: Answers) -> None:
    """Delete an answer and take it out of the knowledge base."""
    if not await answers.delete(answer_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no answer {answer_id}")
