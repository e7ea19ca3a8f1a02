"""The exceptions partout raises, by kind. Every one is a :class:`PartoutError`."""


class PartoutError(Exception):
    """Any error partout reports; the message says what went wrong."""


class InvalidArgumentError(PartoutError, ValueError):
    """An argument that can never work: a partition count of 0, an unknown scheme, a key
    list where none is taken."""


class UnsupportedTypeError(PartoutError, TypeError):
    """A column of a type the operation cannot handle (a key type a scheme cannot hash)."""


class SchemaMismatchError(PartoutError, ValueError):
    """Data that does not fit the call: a key column it lacks, batches of two schemas."""


class CorruptInputError(PartoutError, ValueError):
    """Input bytes that are not what they claim to be."""


class PartoutIOError(PartoutError, OSError):
    """Reading or writing a file failed."""


__all__ = [
    "PartoutError",
    "InvalidArgumentError",
    "UnsupportedTypeError",
    "SchemaMismatchError",
    "CorruptInputError",
    "PartoutIOError",
]
