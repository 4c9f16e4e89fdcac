"""Sensors of Jarvis."""

from sensors.sources import source_partitions_sensor

all_sensors = [source_partitions_sensor]
