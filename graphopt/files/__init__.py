"""Model files: ``model_files`` loads any supported model into the IR and writes the optimized model
back in its own format; ``atomic`` writes files under a temporary name and renames them."""
