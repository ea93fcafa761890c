"""Allocation: the lock-free retry, the decision under the lock, keys from schedulers, cron."""
