# SPDX-License-Identifier: GPL-2.0
"""MetaRoCE wire-compliance suite: an independent peer written from
Documentation/transport.rst alone (it shares no code with rust/proto)."""
