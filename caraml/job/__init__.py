"""What the job script (aux/job.sh.in) runs on each node beside the
driver: the nodes' energy from Slurm's meters (node_energy), the power
guard that puts the GPUs' limits back (power_guard), the watcher that ends
a killed local job's processes (watch), and at the end the failure cause
(failure, with the OOM killer's evidence: oom_evidence) read from the job's
log (log). Standard library only (the node's python3 runs them); below the
row model, which reads what they leave, and importing nothing above."""
