"""Schedules of Jarvis, built from the configuration's cron expressions and timezones by
``build_schedules(config)``."""

from schedules.periodic import build_schedules

__all__ = ["build_schedules"]
