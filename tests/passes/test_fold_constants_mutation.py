import torch

import graphopt


class FilledBuffer(torch.nn.Module):
    """A fresh tensor from a constant, then filled in place: the shifted-window masks of Swin do this."""

    def forward(self, x):
        mask = torch.zeros(x.shape[-1])
        mask[: x.shape[-1] // 2].fill_(1.0)
        return x * mask


def test_a_tensor_written_in_place_computes_what_the_program_does():
    program = torch.export.export(FilledBuffer(), (torch.randn(3, 8),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    x = torch.randn(3, 8)
    torch.testing.assert_close(optimized.module()(x), FilledBuffer()(x))


class FilledFromScalarTensor(torch.nn.Module):
    """fill_ with a 0-d tensor value: the value is a lifted constant that folding must keep 0-d."""

    def forward(self, x):
        mask = torch.zeros(x.shape[-1])
        mask[:2].fill_(torch.full((), 3.0) * 2.0)
        return x * mask


def test_a_folded_scalar_stays_zero_dimensional():
    module = FilledFromScalarTensor()
    program = torch.export.export(module, (torch.randn(3, 8),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    x = torch.randn(3, 8)
    torch.testing.assert_close(optimized.module()(x), module(x))


class BucketsAddedInPlace(torch.nn.Module):
    """T5's relative-position buckets: a constant computation (arange, abs, log...) whose result a fresh
    tensor receives through ``+=``. What the write reads is a constant, and the asserts torch.export adds
    (no readers, no writes) do not count as writes; nothing reads the tensor's old values after the
    write, so the write is read as a functional add and the buckets fold into one constant too."""

    def forward(self, x):
        position = torch.arange(x.shape[-1])[None, :] - torch.arange(x.shape[-1])[:, None]
        buckets = (position > 0).to(torch.long) * 4
        buckets += torch.log(position.abs().float() + 1.0).to(torch.long)
        return x + buckets.float()


def test_what_an_in_place_write_reads_is_still_folded():
    module = BucketsAddedInPlace()
    program = torch.export.export(module, (torch.randn(8, 8),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    targets = {str(n.target) for n in optimized.graph.nodes if n.op == "call_function"}
    assert not {"aten.arange.default", "aten.abs.default", "aten.log.default"} & targets, targets
    assert "aten.add_.Tensor" not in targets, targets
    x = torch.randn(8, 8)
    torch.testing.assert_close(optimized.module()(x), module(x))
