"""Infrastructure shared by all studies: config, download, tracking, stage CLI, atomic I/O, seeding, claims.

No model code lives here (DESIGN.md): a study's method stays in its own package.
"""
