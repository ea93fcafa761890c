"""The version, in a module of its own so that anything may import it without cycles."""

from __future__ import annotations

__version__ = "0.1.0"
