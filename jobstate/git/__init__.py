"""The Git boundary: the only code that runs git or imports GitPython."""
