"""The comparison's charts, drawn with matplotlib into PNG files from what
the computing modules decided (caraml/compare/decision.py, frontier.py,
trend.py, figures.py, power.py): nothing here ranks, selects or judges a
row; each function draws the rows, points or samples it is given.
caraml/compare/output.py calls them and puts the files into the report."""
