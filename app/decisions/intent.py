"""What a message asks for: two logistic regressions over the message's e5 query embedding,
trained on labelled example messages.

Two decisions, so that refusing the bot and refusing the person stop competing:

- **is a person asked for at all** (`Intent.person`): a binary regression, requests for a
  person against questions and small talk. The "bot back" examples are left out of it: out
  of a handoff a message about being handed to a person or kept with the bot asks for a
  person ("no bot please, a person"), and a "no person needed" handed over by mistake is
  given back by the second decision;
- **what else it is** (`Intent.label`): a softmax over the four intents. In a handoff its
  "bot" reading gives the bot back; its "smalltalk" one gets a pleasantry.

The examples (`examples.yaml` beside this file: messages per intent and language, with
negatives that look like another intent labelled as what they are) are embedded with the
knowledge base's embedder (multilingual e5: an example in one language teaches the others
too) and both regressions are fitted to them (with `noisy_copies`, to misspelled copies of
them too: users type "cn sombody call me bak", and e5's subwords move with each slip) when
the classifier is first used (deterministic: seeded copies, full-batch gradient descent
from zero). The person head also learns from labelled first messages of the held-out sets
already reported on (`labelled/` beside this file, `DecisionSettings.person_examples`): many
writers' requests and questions. A message gets the likeliest intent, its probability and
the probability that a person is asked for; how sure the service must be before acting on
them is a setting (`SUPPORTBOT_DECISIONS__…`), calibrated by cross-validation on the
examples and reported on held-out messages (`supportbot eval decisions`)."""

import hashlib
import logging
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from threading import Lock
from typing import Any

import numpy as np

from app.decisions.noise import misspelled_copies
from knowledge.embeddings import Embedder, Vectors, query_vectors
from knowledge.graph_cache import GraphCache
from knowledge.regression import Fit, Floats, SoftmaxRegression
from knowledge.yaml_files import read_yaml

EXAMPLES = Path(__file__).with_name("examples.yaml")
# The model fitted on the examples and the default labelled messages, shipped beside them
# (`supportbot eval fit-decider` writes it): embedding those thousands of messages takes
# minutes of CPU, which a server's first start would otherwise spend before its first turn
# (docs/benchmarks.md#cpu-per-turn-and-start-up).
FITTED = Path(__file__).with_name("fitted.npz")
log = logging.getLogger(__name__)
QUESTION = "question"  # a question or problem report: the bot searches and answers
PERSON = "person"  # a request to be handed to a person
SMALLTALK = "smalltalk"  # a greeting, thanks or acknowledgement that asks nothing
BOT = "bot"  # "no, I just have a question": the bot back instead of a person
INTENTS = (QUESTION, PERSON, SMALLTALK, BOT)

# The fit, chosen by 10-fold cross-validation on the examples (`supportbot eval decisions
# --folds 10`): of scales 5/10/20 and penalties 0.001/0.01, 10 and 0.001 (the regression's
# defaults) gave the best log-loss, i.e. the probabilities that mean what they say. The
# person head was checked the same way: scale 10 and penalty 0.001 again.

# What a labelled message of `DecisionSettings.person_examples` weighs in the person head
# against an example (1): the examples hold the look-alikes written to be hard (complaints,
# people in product questions), the sets many writers' ordinary requests and questions.
PERSON_EXAMPLES_WEIGHT = 0.5
# Misspelled copies of the examples (app/decisions/noise.py), each with its example's
# label, the copies of an example weighing together as much as it: the share of a copy's
# words given a slip, and the first copy's seed (the next copies take the next seeds). A
# change to the noise itself changes NOISE_VERSION. Compared by the same cross-validation,
# on the held-out folds and on misspelled versions of them
# (docs/benchmarks.md#misspelled-copies-of-the-examples): two copies at 0.2 hand over more
# misspelled requests and no more questions; one copy, or two at full weight, hand over more
# questions. Off by default (`DecisionSettings.noisy_copies`): it moves messages that sat at
# a threshold.
NOISE_RATE = 0.2
NOISE_SEED = 0
NOISE_VERSION = 1


@dataclass(frozen=True)
class Intent:
    label: str
    confidence: float  # the label's probability
    probabilities: dict[str, float]  # of the four intents (the softmax)
    person: float = 0.0  # that a person is asked for at all (the person head)


def load_examples(path: Path = EXAMPLES) -> dict[str, list[str]]:
    """Example messages per intent, every language together."""
    data = read_yaml(path)
    examples: dict[str, list[str]] = {}
    for intent, by_language in data["examples"].items():
        if intent not in INTENTS:
            raise ValueError(f"{path}: unknown intent {intent!r}; use one of {INTENTS}")
        examples[intent] = [text for texts in by_language.values() for text in texts]
    return examples


def load_labelled_messages(paths: Sequence[Path]) -> list[tuple[str, str]]:
    """(text, intent) of the messages labelled `intent: question | person | smalltalk` in
    YAML `messages:` lists (the held-out sets' shape); a file that is missing is skipped
    with a warning."""
    labelled = []
    for path in paths:
        if not path.is_file():
            log.warning(
                "labelled messages %s not found: the person head is fitted without them", path
            )
            continue
        for item in read_yaml(path).get("messages") or []:
            if item.get("intent") in (QUESTION, PERSON, SMALLTALK):
                labelled.append((item["text"], item["intent"]))
    return labelled


@dataclass(frozen=True)
class IntentModel:
    """Both decisions fitted on labelled vectors (`fitted`): the four-way softmax, and the
    person head (requests for a person against questions and small talk; "bot back" left
    out), which also takes `person_vectors` with their `person_labels` (labelled messages
    that teach it alone: the softmax keeps the examples' balance of the four intents)."""

    intents: SoftmaxRegression
    person: SoftmaxRegression

    @classmethod
    def fitted(
        cls,
        vectors: Vectors,
        labels: list[str],
        weights: Floats | None = None,
        person_vectors: Vectors | None = None,
        person_labels: Sequence[str] = (),
    ) -> "IntentModel":
        kept = [i for i, label in enumerate(labels) if label != BOT]
        heads = [PERSON if labels[i] == PERSON else QUESTION for i in kept]
        fitted = vectors[kept]
        kept_weights = np.ones(len(kept)) if weights is None else weights[kept]
        if person_vectors is not None and len(person_labels):
            fitted = np.concatenate([fitted, person_vectors])
            heads += [PERSON if label == PERSON else QUESTION for label in person_labels]
            added = np.full(len(person_labels), PERSON_EXAMPLES_WEIGHT)
            kept_weights = np.concatenate([kept_weights, added])
        return cls(
            SoftmaxRegression.fitted(vectors, labels, weights),
            SoftmaxRegression.fitted(fitted, heads, kept_weights),
        )

    def save(self, path: Path, fingerprint: str) -> None:
        """Stored with the fingerprint of what it was fitted on (`load` checks it)."""
        arrays: dict[str, Any] = self.intents.arrays("intents_") | self.person.arrays("person_")
        np.savez(path, fingerprint=np.array(fingerprint), **arrays)

    @classmethod
    def load(cls, path: Path, fingerprint: str) -> "IntentModel | None":
        """The model stored at `path` if it was fitted on what `fingerprint` names."""
        try:
            with np.load(path) as arrays:
                if str(arrays["fingerprint"]) != fingerprint:
                    return None
                return cls(
                    SoftmaxRegression.from_arrays(arrays, "intents_"),
                    SoftmaxRegression.from_arrays(arrays, "person_"),
                )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            log.warning("fitted decider %s unreadable, fitting it again: %s", path, error)
            return None

    def person_probability(self, vector: Vectors) -> float:
        return self.person.predict(vector).get(PERSON, 0.0)

    def read(self, vector: Vectors) -> Intent:
        probabilities = self.intents.predict(vector)
        label = max(probabilities, key=probabilities.__getitem__)
        return Intent(label, probabilities[label], probabilities, self.person_probability(vector))


def with_misspelled_copies(
    examples: dict[str, list[str]], copies: int, rate: float = NOISE_RATE
) -> tuple[list[str], list[str], Floats]:
    """The examples' texts, labels and weights: each example (weight 1) followed by
    `copies` misspelled copies of it with its label, weighing 1/`copies` each (together as
    much as the example)."""
    texts, labels, weights = [], [], []
    for intent, written in examples.items():
        for text in written:
            added = [text, *misspelled_copies(text, copies, NOISE_SEED, rate)]
            texts += added
            labels += [intent] * len(added)
            weights += [1.0] + [1 / copies] * copies if copies else [1.0]
    return texts, labels, np.array(weights)


def _digest(embedder: str, text: str) -> str:
    return hashlib.sha256(f"{embedder}\0{text}".encode()).hexdigest()[:16]


class IntentClassifier:
    """See the module docstring. Fitted on first use (`warm`); with `cache`, the examples'
    vectors (seconds of CPU to embed, and as much again for each misspelled copy) are kept on
    disk under their fingerprint. `noisy_copies`: misspelled copies of each example fitted
    with it (`DecisionSettings.noisy_copies`)."""

    def __init__(
        self,
        embedder: Embedder,
        examples: dict[str, list[str]],
        cache: GraphCache | None = None,
        noisy_copies: int = 0,
        noise_rate: float = NOISE_RATE,
        person_example_files: Sequence[Path] = (),
        fitted: Path | None = None,
    ) -> None:
        self.embedder = embedder
        self._fitted = fitted
        self._examples = examples
        self._person_example_files = tuple(person_example_files)
        self._cache = cache
        self.noisy_copies = noisy_copies
        self.noise_rate = noise_rate
        self._model: IntentModel | None = None
        self._lock = Lock()

    @property
    def fingerprint(self) -> str:
        """Changes with the examples, the embedder and the misspelled copies (what the
        examples' vectors depend on)."""
        text = "\0".join(f"{k}\0{v}" for k, vs in sorted(self._examples.items()) for v in vs)
        if self.noisy_copies:
            text += (
                f"\0noise {NOISE_VERSION} copies {self.noisy_copies} rate {self.noise_rate} "
                f"seed {NOISE_SEED}"
            )
        return _digest(self.embedder.name, text)

    @cached_property
    def person_examples(self) -> list[tuple[str, str]]:
        """The person head's labelled messages, (text, intent), read when first needed (the
        fit, in the warm-up): YAML a server need not read before its port answers."""
        return load_labelled_messages(self._person_example_files)

    def person_example_vectors(self) -> Vectors | None:
        """The person head's labelled messages' vectors (kept on disk under their own
        fingerprint: another set of them leaves the examples' vectors be)."""
        texts = [text for text, _ in self.person_examples]
        if not texts:
            return None
        fingerprint = _digest(self.embedder.name, "\0".join(texts))
        return query_vectors(self.embedder, texts, self._cache, "person-examples", fingerprint)

    @property
    def model_fingerprint(self) -> str:
        """Changes with all the fitted model depends on: the examples' vectors, the person
        head's labelled messages and how both are fitted."""
        person = "\0".join(f"{intent}\0{text}" for text, intent in self.person_examples)
        fitting = f"{PERSON_EXAMPLES_WEIGHT}\0{Fit()}"
        return _digest(self.embedder.name, f"{self.fingerprint}\0{person}\0{fitting}")

    def fit(self) -> IntentModel:
        """Both regressions fitted on the examples' vectors (embedded, or from the cache)."""
        texts, labels, weights = with_misspelled_copies(
            self._examples, self.noisy_copies, self.noise_rate
        )
        vectors = query_vectors(
            self.embedder, texts, self._cache, "intent-examples", self.fingerprint
        )
        person_labels = [intent for _, intent in self.person_examples]
        return IntentModel.fitted(
            vectors, labels, weights, self.person_example_vectors(), person_labels
        )

    def warm(self) -> None:
        """The model stored at `fitted` when it was fitted on these examples, else fitted
        now."""
        with self._lock:
            if self._model is None:
                stored = None
                if self._fitted is not None:
                    stored = IntentModel.load(self._fitted, self.model_fingerprint)
                self._model = stored or self.fit()

    def classify(self, text: str, vector: Vectors | None = None) -> Intent:
        """`vector`: the message's query embedding when the caller has it already."""
        self.warm()
        assert self._model is not None
        query = self.embedder.embed_query(text) if vector is None else vector
        return self._model.read(query)

    def person_probability(self, text: str) -> float:
        """The person head alone (what a clause is read for)."""
        self.warm()
        assert self._model is not None
        return self._model.person_probability(self.embedder.embed_query(text))
