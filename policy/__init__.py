"""The project's policy pack: security rules every layout must satisfy (see rules.py)."""
