"""Declarative automation: evaluates the assets' automation conditions without a click."""

import dagster as dg

automation_sensor = dg.AutomationConditionSensorDefinition(
    "automation_condition_sensor",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Evaluates the assets' automation conditions: each layer (chunks, embeddings, "
                "graph) follows its upstream layer per source once the upstream's blocking "
                "checks passed, and publishing follows when every registered source has data.",
)
