"""Small example models: the seed `split_stack`, MLPs, a registry of test models, and bad input files."""
