"""Test-wide settings."""

from __future__ import annotations

import os

# rich wraps what the commands print at the terminal's width (80 columns when there is no terminal): a long
# temporary path would split the words tests look for, at a place that depends on the path's length.
os.environ["COLUMNS"] = "400"
