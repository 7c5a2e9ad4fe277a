"""The one error type users see: a message that says what was wrong and what would be valid."""


class SpecError(ValueError):
    """Invalid user input (a flag, a spec file, a plan). The CLI prints it as one line, exit code 2."""
