"""scanner package."""
