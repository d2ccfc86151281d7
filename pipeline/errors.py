"""Errors that reach the user as one line and exit code 2 (see ``pipeline.cli.main``)."""


class UserError(Exception):
    """Bad input or a situation the user can fix: printed as one line, exit code 2."""


class UnknownPaper(UserError):
    """A paper id that the warehouse or snapshot does not know."""


class StepFailed(Exception):
    """A pipeline step stopped cleanly (e.g. too many consecutive HTTP failures).

    Everything fetched before the stop is kept; the watermark has not moved past it."""
