import torch

import graphopt


class ReadBetweenFills(torch.nn.Module):
    """A tensor read, written in place, and read again: the two products read one IR value, but not the
    same contents, so they are no common subexpression."""

    def forward(self, x):
        mask = torch.zeros(4)
        mask[:2] = 1.0
        y = x * mask
        mask[2:] = 2.0
        return y + x * mask


def test_reads_on_either_side_of_an_in_place_write_stay_apart():
    module = ReadBetweenFills()
    program = torch.export.export(module, (torch.randn(3, 4),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    assert "merged_duplicate" not in report.rule_counts
    x = torch.randn(3, 4)
    torch.testing.assert_close(optimized.module()(x), module(x))
