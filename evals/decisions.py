"""How well the service routes first messages: `supportbot eval decisions`.

Reads labelled messages (`evals/decisions/heldout_20.yaml`: written blind, never edited to
fit and never fitted to; each message has its language, its intent — `question`, `person`
or `smalltalk` — and for questions whether the GnuCash manuals answer it; a set the person
head is fitted to is reported as in-sample) and runs each through the service's own
decisions: the decider (app/decisions) and the knowledge base's relevance threshold. Per
language it reports:

- **handoff**: product questions handed to a person (goal ≤ 2%), requests for a person
  handed over (recall, goal ≥ 95%), and precision — with the offline model's threshold
  and with a real model's (before the model; below it the model decides);
- **small talk**: precision of the messages answered as small talk, and the problem
  reports answered that way (goal 0);
- **"not in the docs"**: unanswerable questions whose search finds nothing relevant
  (goal ≥ 90%) and answerable ones refused that way (goal ≤ 5%);
- **language identification** accuracy.

`--folds N` instead cross-validates the intent classifier on its own examples (the
calibration set, app/decisions/examples.yaml), which is how its thresholds were chosen; and
on misspelled versions of the held-out examples (how the misspelled copies fitted with the
examples were chosen: `--noisy-copies`, `--noise-rate`)."""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from app.decisions.decider import Decision, MessageDecider
from app.decisions.intent import EXAMPLES, NOISE_SEED, IntentModel, load_labelled_messages
from app.decisions.noise import misspelled_copies
from knowledge.embeddings import Embedder, Vectors
from knowledge.relevance import RelevanceThresholds, best_similarity
from knowledge.scope import DocumentationScope
from knowledge.types import Retriever

# The one held-out set that trains nothing (the earlier ones train the person head:
# app/decisions/labelled/).
HELDOUT = Path(__file__).with_name("decisions") / "heldout_20.yaml"
QUESTION, PERSON, SMALLTALK, BOT = "question", "person", "smalltalk", "bot"
ALL = "all"


@dataclass(frozen=True)
class LabelledMessage:
    id: str
    text: str
    language: str
    intent: str
    docs: str | None = None  # questions: answerable | unanswerable | unknown


def load_messages(path: Path = HELDOUT) -> list[LabelledMessage]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        LabelledMessage(m["id"], m["text"], m["language"], m["intent"], m.get("docs"))
        for m in data["messages"]
    ]


def in_sample(path: Path, person_examples: Sequence[Path]) -> bool:
    """Whether the labelled messages at `path` are one of the sets the person head is
    fitted to (`decisions.person_examples`): figures on them are in-sample."""
    return path.resolve() in {fitted.resolve() for fitted in person_examples}


def load_examples(path: Path = EXAMPLES) -> list[LabelledMessage]:
    """The classifier's examples as labelled messages (their language from the file's
    grouping), and the extra languages' questions."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    messages = [
        LabelledMessage(f"{intent}-{language}-{n}", text, language, intent)
        for intent, by_language in data["examples"].items()
        for language, texts in by_language.items()
        for n, text in enumerate(texts)
    ]
    messages += [
        LabelledMessage(f"language-{language}-{n}", text, language, QUESTION)
        for language, texts in (data.get("languages") or {}).items()
        for n, text in enumerate(texts)
    ]
    return messages


@dataclass(frozen=True)
class Decided:
    message: LabelledMessage
    decision: Decision
    hands_over: bool  # offline model's threshold
    hands_over_before_model: bool  # a real model's
    smalltalk: bool
    not_in_docs: bool | None = None  # None: not searched


@dataclass(frozen=True)
class Share:
    count: int
    of: int

    @property
    def value(self) -> float | None:
        return self.count / self.of if self.of else None

    def __str__(self) -> str:
        return f"{self.count}/{self.of}" + (f" ({self.value:.0%})" if self.of else "")


@dataclass(frozen=True)
class DecisionFigures:
    language: str
    questions_handed_over: Share
    questions_handed_over_before_model: Share
    persons_handed_over: Share
    persons_handed_over_before_model: Share
    handoff_precision: Share
    smalltalk_precision: Share
    problems_as_smalltalk: Share
    unanswerable_caught: Share
    answerable_refused: Share
    language_right: Share


def _share(rows: Iterable[Decided], counted: Callable[[Decided], bool]) -> Share:
    listed = list(rows)
    return Share(sum(map(counted, listed)), len(listed))


def figures(language: str, rows: Sequence[Decided]) -> DecisionFigures:
    questions = [r for r in rows if r.message.intent == QUESTION]
    persons = [r for r in rows if r.message.intent == PERSON]
    searched = [r for r in questions if r.not_in_docs is not None]
    return DecisionFigures(
        language=language,
        questions_handed_over=_share(questions, lambda r: r.hands_over),
        questions_handed_over_before_model=_share(questions, lambda r: r.hands_over_before_model),
        persons_handed_over=_share(persons, lambda r: r.hands_over),
        persons_handed_over_before_model=_share(persons, lambda r: r.hands_over_before_model),
        handoff_precision=_share(
            [r for r in rows if r.hands_over], lambda r: r.message.intent == PERSON
        ),
        smalltalk_precision=_share(
            [r for r in rows if r.smalltalk], lambda r: r.message.intent == SMALLTALK
        ),
        problems_as_smalltalk=_share(questions, lambda r: r.smalltalk),
        unanswerable_caught=_share(
            [r for r in searched if r.message.docs == "unanswerable"], lambda r: bool(r.not_in_docs)
        ),
        answerable_refused=_share(
            [r for r in searched if r.message.docs == "answerable"], lambda r: bool(r.not_in_docs)
        ),
        language_right=_share(rows, lambda r: r.decision.language == r.message.language),
    )


def by_language(rows: Sequence[Decided], main: Sequence[str]) -> list[DecisionFigures]:
    """Figures for each of `main`, the other languages together, and all."""
    groups = [(lang, [r for r in rows if r.message.language == lang]) for lang in main]
    others = [r for r in rows if r.message.language not in main]
    if others:
        groups.append(("other", others))
    groups.append((ALL, list(rows)))
    return [figures(language, group) for language, group in groups if group]


def decide_all(
    decider: MessageDecider,
    messages: Sequence[LabelledMessage],
    knowledge: Retriever | None = None,
    relevance: RelevanceThresholds | None = None,
    on_message: Callable[[], None] | None = None,
    scope: DocumentationScope | None = None,
) -> list[Decided]:
    """Each message through the decider and, for questions with a `docs` label, the
    knowledge base's relevance threshold and the documentation's `scope`, as the search
    tool applies them (when `knowledge` is given)."""
    rows = []
    for message in messages:
        decision = decider.decide(message.text)
        not_in_docs = None
        if knowledge is not None and message.docs in ("answerable", "unanswerable"):
            threshold = relevance.for_query(message.text) if relevance else 0.0
            not_in_docs = best_similarity(knowledge, message.text) < threshold or (
                scope is not None and not scope.covers(message.text)
            )
        rows.append(_decided(decider, message, decision, not_in_docs))
        if on_message:
            on_message()
    return rows


def _decided(
    decider: MessageDecider,
    message: LabelledMessage,
    decision: Decision,
    not_in_docs: bool | None,
    read: Callable[[str], str] | None = None,
) -> Decided:
    return Decided(
        message,
        decision,
        decider.hands_over(decision, model_decides=False),
        decider.hands_over(decision, model_decides=True),
        decider.is_smalltalk(decision, message.text, read),
        not_in_docs,
    )


# The held-out folds' misspelled versions (app/decisions/noise.py): seeds other than the
# fit's copies', and how many versions of each held-out example.
HELDOUT_NOISE_SEED = 1000
HELDOUT_NOISE_VERSIONS = 2
HELDOUT_NOISE_RATE = 0.3


@dataclass(frozen=True)
class CrossValidation:
    clean: list[Decided]  # each example, held out
    noisy: list[Decided]  # misspelled versions of each held-out example


def cross_validate(
    decider: MessageDecider,
    messages: Sequence[LabelledMessage],
    folds: int = 10,
    copies: int | None = None,
    rate: float | None = None,
    heldout_rate: float = HELDOUT_NOISE_RATE,
) -> CrossValidation:
    """Each example decided with both decisions fitted on the other folds (the extra
    languages' questions are only decided; the person head also on the decider's
    `person_examples`, as in the service), under the decider's thresholds; and
    `HELDOUT_NOISE_VERSIONS` misspelled versions of it (at `heldout_rate`) by the same fit.
    Each fold's fit takes the misspelled copies (`copies` of each example at `rate`, by
    default the decider's) of its own examples only."""
    embedder = decider.classifier.embedder
    copies = decider.classifier.noisy_copies if copies is None else copies
    rate = decider.classifier.noise_rate if rate is None else rate
    vectors = np.stack([embedder.embed_query(m.text) for m in messages])
    fold = np.arange(len(messages)) % folds
    trainable = np.array([not m.id.startswith("language-") for m in messages])
    copied = {
        i: np.stack(
            [embedder.embed_query(t) for t in misspelled_copies(m.text, copies, NOISE_SEED, rate)]
        )
        for i, m in enumerate(messages)
        if copies and trainable[i]
    }
    versions = {
        i: [
            (replace(m, id=f"{m.id}~{n}", text=text), embedder.embed_query(text))
            for n, text in enumerate(
                misspelled_copies(m.text, HELDOUT_NOISE_VERSIONS, HELDOUT_NOISE_SEED, heldout_rate)
            )
        ]
        for i, m in enumerate(messages)
    }
    person_vectors = decider.classifier.person_example_vectors()  # the service's, cached
    person_labels = [intent for _, intent in decider.classifier.person_examples]
    clean: list[Decided] = []
    noisy: list[Decided] = []
    for k in range(folds):
        fit = [int(i) for i in np.flatnonzero((fold != k) & trainable)]
        fitted = [vectors[fit], *(copied[i] for i in fit if i in copied)]
        labels = [messages[i].intent for i in fit]
        labels += [messages[i].intent for i in fit if i in copied for _ in range(copies)]
        weights = np.ones(len(labels))
        weights[len(fit) :] = 1 / copies if copies else 1.0  # as in the service's fit
        model = IntentModel.fitted(
            np.concatenate(fitted), labels, weights, person_vectors, person_labels
        )
        for i in map(int, np.flatnonzero(fold == k)):
            clean.append(_held_out(decider, model, messages[i], vectors[i]))
            noisy += [_held_out(decider, model, m, v) for m, v in versions[i]]
    return CrossValidation(clean, noisy)


def leave_one_set_out(
    decider: MessageDecider, examples: Sequence[LabelledMessage], thresholds: Sequence[float]
) -> list[tuple[float, Share, Share]]:
    """The person head with each of the decider's labelled sets (`person_examples`) held
    out in turn, fitted on the examples and the other sets: for each threshold, the held-out
    requests for a person and questions given a person as a whole (what `person_confidence`
    is read from; sets by other writers tell more than folds of one)."""
    classifier = decider.classifier
    embedder = classifier.embedder
    # The sets in the classifier's order, their vectors from its cache, cut back into sets.
    sets = [load_labelled_messages([path]) for path in decider.settings.person_examples]
    every = classifier.person_example_vectors()
    if every is None or len(every) != sum(map(len, sets)):
        raise ValueError("no labelled sets to hold out (decisions.person_examples)")
    ends = np.cumsum([len(held) for held in sets])
    vectors = np.split(every, ends[:-1])
    fitted = [m for m in examples if not m.id.startswith("language-")]  # as cross_validate
    example_vectors = np.stack([embedder.embed_query(m.text) for m in fitted])
    labels = [m.intent for m in fitted]
    given: list[tuple[str, float]] = []  # (intent, probability of a person) of each held out
    for index, held in enumerate(sets):
        others = [i for i in range(len(sets)) if i != index]
        model = IntentModel.fitted(
            example_vectors,
            labels,
            person_vectors=np.concatenate([vectors[i] for i in others]),
            person_labels=[intent for i in others for _, intent in sets[i]],
        )
        given += [
            (intent, model.person_probability(v))
            for (_, intent), v in zip(held, vectors[index], strict=True)
        ]

    def share(intent: str, threshold: float) -> Share:
        rows = [p for label, p in given if label == intent]
        return Share(sum(p >= threshold for p in rows), len(rows))

    return [(t, share(PERSON, t), share(QUESTION, t)) for t in thresholds]


def _held_out(
    decider: MessageDecider, model: IntentModel, message: LabelledMessage, vector: Vectors
) -> Decided:
    """A message decided as the decider would, by a fold's fit (its clauses too)."""
    embedder = decider.classifier.embedder
    decision = decider.decision(message.text, model.read(vector), _reader(model, embedder))
    return _decided(
        decider, message, decision, None, lambda part: model.read(embedder.embed_query(part)).label
    )


def _reader(model: IntentModel, embedder: Embedder) -> Callable[[str], float]:
    """A fold's person head as the decider reads a clause."""
    return lambda text: model.person_probability(embedder.embed_query(text))


def threshold_sweep(
    rows: Sequence[Decided], intent: str, thresholds: Sequence[float]
) -> list[tuple[float, Share, Share, Share]]:
    """For each threshold: the messages of `intent` given it at that probability, the
    questions given it, and the look-alikes given it (what a threshold is chosen from):
    for a person the "bot back" examples (out of a handoff they hand over: the second
    decision gives the bot back), for the bot back the requests for a person (refusals of
    the bot among them), for small talk the requests for a person."""
    other = BOT if intent == PERSON else PERSON

    def given(intent_of: str, threshold: float) -> Share:
        return _share(
            [r for r in rows if r.message.intent == intent_of],
            lambda r: _reads_as(r.decision, intent, threshold),
        )

    return [(t, given(intent, t), given(QUESTION, t), given(other, t)) for t in thresholds]


def _reads_as(decision: Decision, intent: str, threshold: float) -> bool:
    if intent == PERSON:  # the person head
        return decision.person >= threshold
    return decision.intent == intent and decision.confidence >= threshold


def clause_sweep(
    rows: Sequence[Decided], whole: float, thresholds: Sequence[float]
) -> list[tuple[float, Share, Share]]:
    """For each threshold of a clause's request for a person: the requests for a person
    handed over (as a whole at `whole`, or by a clause) and the questions handed over."""

    def given(intent: str, threshold: float) -> Share:
        return _share(
            [r for r in rows if r.message.intent == intent],
            lambda r: (
                r.decision.person >= whole or r.decision.person_clause >= max(threshold, whole)
            ),
        )

    return [(t, given(PERSON, t), given(QUESTION, t)) for t in thresholds]
