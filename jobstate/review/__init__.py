"""Review: verify, the facts, diff, report and their renderers, annotations, migrate, show's view."""
