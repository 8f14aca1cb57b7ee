# SPDX-License-Identifier: GPL-2.0
"""The scenarios, in the order they run."""
from . import basic, verbs, loss, refusals, cc, drops, ud, uc  # noqa: F401
