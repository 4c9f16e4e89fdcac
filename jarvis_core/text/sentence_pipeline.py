"""A sentence-transformers model's whole pipeline (transformer, pooling, dense and
normalisation modules) as one torch module fed token features and returning the sentence
embedding: what the exporters trace, for OpenVINO (the ingest backend) and for ONNX (the
query model). torch is imported by the caller's call, not by importing this module."""

from __future__ import annotations

from jarvis_core.text.runtime_tokenizer import EXAMPLE_TEXTS


def sentence_pipeline(sentence_model):
    """(module, its input names, example inputs in that order), the example a padded batch
    of ``EXAMPLE_TEXTS``; features that are no tensors are fixed to the example's."""
    import torch

    example = sentence_model.preprocess(list(EXAMPLE_TEXTS))
    names = [name for name, value in example.items() if isinstance(value, torch.Tensor)]
    constants = {name: value for name, value in example.items() if name not in names}

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.sentence_model = sentence_model

        def forward(self, *tensors):
            features = {**constants, **dict(zip(names, tensors, strict=True))}
            return self.sentence_model(features)["sentence_embedding"]

    return SentenceEmbedding().eval(), names, tuple(example[name] for name in names)
