"""`caraml-compare`: the row.json files of JUBE runs from several systems
side by side, with time- and energy-to-solution for a fixed job, scaling
efficiency, verdicts against reference bands, plots and an HTML report."""


class CompareError(ValueError):
    """Bad input: the message is one line that names the file and the problem."""
