"""Methods that read the host through sysfs/procfs: gh, rapl, hwmon, estimate."""
