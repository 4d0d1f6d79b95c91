"""The coverage run's guard on torch archives flags tensors the optimized module holds outside its
parameters and buffers (``.to(device)`` would leave them behind), but not those the original already
held so: torch.export lifts a tensor the model makes in forward into such a constant, and the optimized
program keeps the original's kinds."""

import torch

import graphopt
from bench.coverage.guards import check


class Doubling(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


class DoublingByConstant(torch.nn.Module):
    """The same function, with a tensor made in forward (torch.export lifts it into a constant)."""

    def forward(self, x):
        return x * torch.tensor([2.0])


def _saved(module, path, args):
    torch.export.save(torch.export.export(module, args), path)
    return path


def test_a_constant_the_original_holds_too_is_not_flagged(tmp_path):
    args = (torch.randn(3, 4),)
    original = _saved(DoublingByConstant(), tmp_path / "original.pt2", args)
    kept = _saved(DoublingByConstant(), tmp_path / "kept.pt2", args)  # (as graphopt keeps LeViT's)
    verdict = check(original, kept, args, [])
    assert verdict["ok"], verdict["problems"]
    optimized = tmp_path / "optimized.pt2"
    _, report = graphopt.optimize(original, output=optimized)
    assert check(original, optimized, args, report.notes)["ok"]


def test_a_constant_only_the_optimized_module_holds_is_flagged(tmp_path):
    args = (torch.randn(3, 4),)
    original = _saved(Doubling(), tmp_path / "original.pt2", args)
    optimized = _saved(DoublingByConstant(), tmp_path / "optimized.pt2", args)
    verdict = check(original, optimized, args, [])
    assert not verdict["ok"]
    assert any("tensors held outside parameters and buffers" in p for p in verdict["problems"])
