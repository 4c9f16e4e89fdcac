"""Schedules of Jarvis."""

from schedules.refresh import nightly_refresh_schedule

all_schedules = [nightly_refresh_schedule]
