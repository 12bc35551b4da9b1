"""The one error type of data preparation."""


class DataError(RuntimeError):
    """Missing, incomplete or corrupt data; the message (one line) says where we looked and what to run."""
