"""One package per benchmark; the registry scans this folder and nothing else."""
