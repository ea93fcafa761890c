"""The state repository: Store, the transaction, the work tree, catalog, lock, YAML, config, init, episode records."""
