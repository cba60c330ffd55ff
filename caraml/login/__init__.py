"""Tools that run on the login node, before and around the jobs: JUBE calls
them (the pre-flight, the LOCAL system's values) or the README's main command
does (whether every row succeeded), with the login node's python3. Standard
library only: they run before any environment is set up. The helpers that run
on the compute nodes, inside the jobs, are the modules of caraml/ itself."""
