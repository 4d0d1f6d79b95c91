"""Frontends: exported models → the IR."""
