"""A sentence-transformers model's tokenization without torch: the model's fast tokenizer
(the ``tokenizers`` library) cutting and padding as sentence-transformers does, checked to
give the token ids the model is fed.

Made once, where the model is loaded anyway (exporting the query model, converting it for
OpenVINO), and saved beside the result; processes that only encode then need neither torch
nor transformers. Importing this module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from tokenizers import Tokenizer

# Each model input a graph may take, and the field of a tokenizers Encoding that fills it.
TOKENIZER_FIELDS = {"input_ids": "ids", "attention_mask": "attention_mask",
                    "token_type_ids": "type_ids"}
TOKENIZER_FILE = "tokenizer.json"  # the name a runtime tokenizer is saved under
# Two texts of different lengths: a batch whose features include the padding (a graph traced
# from an unpadded batch may leave the mask out).
EXAMPLE_TEXTS = ("A first example.",
                 "And a second, much longer example sentence, so that the batch is padded.")


class TokenizerUnsupported(ValueError):
    """The model's features cannot be made by a tokenizer alone (the message says why, as a
    phrase following the model's name)."""


def check_tokenizable(sentence_model, prompts: Sequence[str]) -> None:
    """Refuse, with the reason, what a graph fed with token ids alone cannot reproduce."""
    if "message" in getattr(sentence_model[0], "modality_config", {}):
        raise TokenizerUnsupported("renders text through a chat template")
    if any(prompts) and any(getattr(module, "include_prompt", True) is False
                            for module in sentence_model):
        raise TokenizerUnsupported("leaves its query prompt out of the pooling")
    features = sentence_model.preprocess(list(EXAMPLE_TEXTS))
    unknown = sorted(name for name, value in features.items()
                     if hasattr(value, "shape") and name not in TOKENIZER_FIELDS)
    if unknown:
        raise TokenizerUnsupported("reads features a tokenizer alone does not give: "
                                   + ", ".join(unknown))


def runtime_tokenizer(sentence_model, max_seq_length: int) -> Tokenizer:
    """The model's fast tokenizer, cutting and padding as sentence-transformers makes it."""
    hf_tokenizer = sentence_model.tokenizer
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TokenizerUnsupported("has no fast (tokenizers) tokenizer")
    if hf_tokenizer.pad_token_id is None:
        raise TokenizerUnsupported("has a tokenizer without a padding token")
    tokenizer = Tokenizer.from_str(backend.to_str())
    tokenizer.enable_truncation(max_seq_length, strategy="longest_first",
                                direction=hf_tokenizer.truncation_side)
    tokenizer.enable_padding(direction=hf_tokenizer.padding_side,
                             pad_id=hf_tokenizer.pad_token_id,
                             pad_type_id=hf_tokenizer.pad_token_type_id,
                             pad_token=hf_tokenizer.pad_token)
    return tokenizer


def token_features(tokenizer: Tokenizer, texts: Sequence[str], inputs: Sequence[str]
                   ) -> dict[str, np.ndarray]:
    """The graph inputs ``inputs`` for ``texts`` (prompts already prepended), cut and padded.
    A ``Tokenizer`` is not safe to share between threads: callers hold their own lock."""
    encodings = tokenizer.encode_batch(list(texts))
    return {name: np.array([getattr(encoding, TOKENIZER_FIELDS[name]) for encoding in encodings],
                           dtype=np.int64)
            for name in inputs}


def probe_texts(max_seq_length: int) -> list[str]:
    """Texts that exercise the tokenizer and the graph: the shortest input, punctuation,
    accents, scripts beyond Latin, odd whitespace and a text longer than the model reads."""
    too_long = " ".join(f"word{index} and more" for index in range(max_seq_length))
    return [
        "",
        "Lunch?",
        "How does the ingest pipeline retry failed uploads after a timeout?",
        "Café naïve façade — ÉCOLE Straße; emoji 🚀, CJK 日本語の文章, Cyrillic текст.",
        "  leading\tand trailing whitespace\nacross lines  ",
        too_long,
    ]


def probe_batches(max_seq_length: int) -> list[list[str]]:
    """The probe texts one at a time, then all in one padded batch."""
    probes = probe_texts(max_seq_length)
    return [[probe] for probe in probes] + [probes]


def differing_feature(tokenize: Callable[[list[str]], dict[str, np.ndarray]], sentence_model,
                      prompt: str, max_seq_length: int) -> str | None:
    """Where ``tokenize`` (prompt prepended) and sentence-transformers feed the model
    different token features on the probe texts, or None when they never do."""
    for batch in probe_batches(max_seq_length):
        expected = sentence_model.preprocess(batch, prompt=prompt)
        for name, values in tokenize(batch).items():
            if not np.array_equal(values, expected[name].numpy()):
                return (f"the tokenizers library gives other {name} than the model for "
                        f"{batch[0][:40]!r}")
    return None
