"""CLI subcommands: one module per subcommand, each exposing ``register(subparsers)``.

Modules are discovered, so a new stage adds its own file and never edits a shared list.
"""
