"""The embedding model, loaded only by the steps that embed."""

from dagster import ConfigurableResource
from pydantic import PrivateAttr

from jarvis_core.text.tokens import model_dimension
from jarvis_resources.config import JarvisConfigResource


class EmbedderResource(ConfigurableResource):
    """The configured sentence-transformers model: its name and dimension are read from the
    model's files, the weights are loaded once per run process when a step embeds."""

    jarvis: JarvisConfigResource

    _embedder = PrivateAttr(default=None)
    _cache = PrivateAttr(default=None)

    @property
    def model(self) -> str:
        return self.jarvis.load().embedding.model

    @property
    def dimension(self) -> int:
        return model_dimension(self.model) or self.get().dimension

    @property
    def cache_hits(self) -> int:
        """Texts this run took from the embedding cache instead of the model."""
        return self._cache.hits if self._cache is not None else 0

    @property
    def backend(self) -> str | None:
        """The backend the loaded model runs on; None while nothing needed it."""
        return self._embedder.backend if self._embedder is not None else None

    @property
    def choice(self):
        """The backend and device the configuration and this machine choose, with the
        precision and why (jarvis_core.embedding_backends.BackendChoice), known without
        loading the model."""
        from jarvis_core.embedding_backends import choose_backend

        settings = self.jarvis.load().embedding
        return choose_backend(settings.backend, settings.device)

    def embed(self, texts: list[str]):
        """Embed chunks; with ``embedding.cache`` texts embedded before come from the cache
        and the model is loaded only for the others."""
        settings = self.jarvis.load().embedding
        if not settings.cache:
            return self.get().embed(texts)
        if self._cache is None:
            from jarvis_core.text.embedding_cache import CachedEmbedder, cache_file

            self._cache = CachedEmbedder(
                cache_file(self.jarvis.load().cache_dir, settings.model,
                           self.choice.precision),
                self.get)
        return self._cache.embed(texts)

    def teardown_after_execution(self, context) -> None:
        if self._cache is not None:
            self._cache.close()

    def get(self):
        """The loaded model (jarvis_core.text.embedder.Embedder)."""
        if self._embedder is None:
            from jarvis_core.text.embedder import shared_embedder

            config = self.jarvis.load()
            settings = config.embedding
            self._embedder = shared_embedder(settings.model, device=settings.device,
                                             batch_size=self.batch_size,
                                             backend=settings.backend,
                                             cache_dir=config.cache_dir,
                                             max_streams=config.resources.inference_streams)
        return self._embedder

    @property
    def batch_size(self) -> int:
        """``embedding.batch_size``, else the chosen device's default, on the CPU at most
        what the memory budget gives a stream (``resources.embedding_batch``)."""
        config = self.jarvis.load()
        choice = self.choice
        if config.embedding.batch_size or choice.accelerator:
            return config.embedding.batch_size or choice.default_batch_size
        return min(choice.default_batch_size, config.resources.embedding_batch)
