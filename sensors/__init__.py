"""Sensors of Jarvis."""

from sensors.automation import automation_sensor
from sensors.sources import source_partitions_sensor

all_sensors = [source_partitions_sensor, automation_sensor]
