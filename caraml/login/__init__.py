"""Tools that run on the login node, before and around the jobs: JUBE calls
them (the pre-flight, the job planner, the LOCAL system's values) or the
README's main command does (whether every row succeeded). The planner
(jobplan.py) runs the others with the suite's Python where it exists, else
with the login node's python3. Standard library only: they run before any
environment is set up. The helpers that run
on the compute nodes, inside the jobs, are caraml/job/."""
