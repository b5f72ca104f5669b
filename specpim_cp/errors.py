"""The one exception type users can cause: the CLI prints its message on one line and exits with 2."""


class ScenarioError(ValueError):
    """Bad input or an infeasible request; the message names the field or the shortfall."""
