"""Paid steps: the guard, the run protocol, reservations and budget, resolution, approve and complete."""
