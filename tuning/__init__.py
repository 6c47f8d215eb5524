"""tuning package."""
