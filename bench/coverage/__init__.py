"""Coverage of real architectures: graphopt on models built from transformers, torchvision, diffusers and
a recommendation-style model, exported three ways, optimized with the numeric check on, guarded against
what that check does not see (guards.py), compared with ONNX Runtime's transformer optimizer, and drawn.
Not part of CI: it needs transformers, torchvision and diffusers.

Set up once (a separate environment, so the project's own torch stays as it is; a CUDA build of torch
2.14.1, about 5.5 GB, which is what torchvision 0.29.1 imports beside):

    bash bench/coverage/setup.sh            # creates .venv-coverage/ with graphopt installed editable

Run (about half an hour on two cores, pictures included):

    .venv-coverage/bin/python -m bench.coverage                 # all models, all export paths
    .venv-coverage/bin/python -m bench.coverage --models hf_bert --paths onnx_dynamo

Results: bench/results/coverage.md and coverage.json; pictures in bench/results/coverage/.
"""
