"""Pure core: values in, values out. No clock, no files, no Git, no third-party imports."""
