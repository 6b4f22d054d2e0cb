"""Pulumi component resources, one per file with its Args beside it."""
