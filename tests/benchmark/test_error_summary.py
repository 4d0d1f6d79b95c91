"""A runtime's failure in a benchmark row is one line that says what failed, even where the exception's
first line only introduces the cause (torch.compile's BackendCompilerFailed)."""

from graphopt.benchmark.compare import error_summary


class BackendCompilerFailed(Exception):
    pass


def test_an_introducing_first_line_is_followed_by_the_cause():
    error = BackendCompilerFailed("backend='inductor' raised:\nRuntimeError: bad dtype Half\n\nmore context")
    expected = "BackendCompilerFailed: backend='inductor' raised: RuntimeError: bad dtype Half"
    assert error_summary(error) == expected


def test_a_plain_message_keeps_its_first_line_and_an_empty_one_its_type():
    assert error_summary(ValueError("shape mismatch\ndetails")) == "ValueError: shape mismatch"
    assert error_summary(RuntimeError()) == "RuntimeError: "
    assert len(error_summary(RuntimeError("x" * 1000))) == 300
