# SPDX-License-Identifier: GPL-2.0
"""The scenarios, in the order they run."""

from . import basic, verbs, grouping, loss, refusals, cc, drops, bundles, rides, ud, uc  # noqa: F401
