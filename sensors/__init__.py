"""Sensors of Jarvis."""

from sensors.automation import automation_sensor
from sensors.run_failures import run_failure_notices
from sensors.vault_changes import vault_changes_sensor

all_sensors = [vault_changes_sensor, automation_sensor, run_failure_notices]
