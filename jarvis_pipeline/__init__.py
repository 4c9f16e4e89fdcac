"""Running the pipeline in this process, as `jarvis refresh` does: what needs a run, the
runs on the project's Dagster instance (shared with `jarvis ui` and `jarvis daemon`),
publishing. Dagster is imported only once a source needs a run."""
