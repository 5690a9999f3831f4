"""Errors that mean "the input is bad" (CLI exit code 2), as opposed to internal failures."""


class RecsysInputError(Exception):
    """Bad input from the user: an unreadable file, a bad option, a missing model.

    The message is shown to the user as one line, so it must name what is wrong and where.
    """
