"""Preparing a machine and running a step on it: the one list of host steps, SSH and the envelope."""
