"""The one error type of data preparation (defined in `scpo.errors`, so that training and evaluation can raise it for
data they cannot find without importing this package)."""

from scpo.errors import DataError

__all__ = ["DataError"]
