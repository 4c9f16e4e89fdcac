"""Sensors of Jarvis, one concern per module; the definitions load every sensor defined at
module level here (``dg.load_definitions_from_package_module``), so none is listed by hand."""
