"""The model's units: a month of 730 hours (AWS's billing month) and a "GB" of data (2^30 bytes)."""

from __future__ import annotations

HOURS_PER_MONTH = 730.0
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
GIB = 1024**3  # AWS bills "GB" of data as 2^30 bytes
