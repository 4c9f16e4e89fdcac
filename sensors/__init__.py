"""Sensors of Jarvis."""

from sensors.automation import automation_sensor
from sensors.run_failures import run_failure_notices
from sensors.source_changes import repo_changes_sensor, ticket_exports_sensor
from sensors.vault_changes import vault_changes_sensor

all_sensors = [vault_changes_sensor, repo_changes_sensor, ticket_exports_sensor,
               automation_sensor, run_failure_notices]
