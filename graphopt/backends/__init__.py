"""Backends: the IR → exported models."""
