"""What the suite's ReFrame checks (regression/) run on: the site
configuration made from platform.xml (site.py), each check's work package
planned by the suite's own JUBE script (plan.py), and the row's figures as
ReFrame's sanity, performance variables, references and perflog fields
(figures.py). Nothing here imports ReFrame: the checks call these functions,
and JUBE users never need ReFrame."""
