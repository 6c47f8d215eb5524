"""The generic runner: plan → stream through Ray Data → aggregate → files → MLflow."""
