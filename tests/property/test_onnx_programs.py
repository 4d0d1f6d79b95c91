from hypothesis import HealthCheck, given, settings
from program_strategies import programs

from models.random_checks import build, check_adversarial, check_idempotent, optimize_checked

SETTINGS = settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(programs())
def test_optimize_preserves_outputs_and_every_pass_keeps_the_graph_valid(program):
    original = build(program, "onnx")
    optimized, _ = optimize_checked(original)
    check_adversarial(original, optimized)


@settings(SETTINGS, max_examples=60)
@given(programs())
def test_optimizing_twice_equals_optimizing_once(program):
    once, _ = optimize_checked(build(program, "onnx"))
    check_idempotent(once)
