"""``tomllib`` on every Python the README promises (3.10+): the standard library's from 3.11, the
``tomli`` backport before (the dev extra installs it below 3.11). ``from tests.tomlcompat import tomllib``."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

__all__ = ["tomllib"]
