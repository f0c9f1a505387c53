"""What the GPU tests of a quantized format check of each tensor (test_int_group_gpu.py,
test_nvfp4_gpu.py): libiris's GPU dequantization equal to the CPU reader's bit for bit (FP32
and BF16), and its linear within the FP32 bound of a float64 reference."""

import numpy as np


def check_tensor_on_gpu(torch, gpu, cpu, name, rows=(3,), weight_roundings=0):
    """gpu: iris.torch's tensor; cpu: the numpy reader's. weight_roundings: how many FP32
    roundings of each weight the kernel may differ from the reference by (a scale the kernels
    apply to the sums instead of to each weight: 1)."""
    got32 = gpu.dequantize(torch.float32).cpu().numpy()
    want32 = cpu.dequantize("float32", backend="numpy")
    assert got32.tobytes() == want32.tobytes(), name
    got16 = gpu.dequantize(torch.bfloat16).cpu().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got16, cpu.dequantize("bfloat16", backend="numpy").view(np.uint16)), name
    k = cpu.shape[-1]
    w = want32.reshape(-1, k).astype(np.float64)
    for n in rows:  # y = x W^T for n rows of BF16 activations, against float64 sums of the same products
        x = torch.randn(n, k, device="cuda").to(torch.bfloat16)
        y = gpu.linear(x).float().cpu().numpy().astype(np.float64)
        xs = x.float().cpu().numpy().astype(np.float64)
        ref = xs @ w.T
        mag = np.abs(xs) @ np.abs(w).T
        u = 2.0 ** -24
        # the FP32 sums, the weights' own roundings, underflow, and the BF16 output's rounding
        bound = (k * u / (1 - k * u)) * mag + mag * 2 * u * weight_roundings + k * 2.0 ** -126 + np.abs(ref) * 2.0 ** -8
        assert (np.abs(y - ref) <= bound).all(), name


def check_archive_on_gpu(torch, itorch, path, fmt, **kw):
    """Every tensor of format `fmt` in the archive at `path`, loaded by iris.torch, through
    check_tensor_on_gpu against the numpy reader's (kw: its rows, weight_roundings); returns how
    many were checked."""
    import iris_archive

    cpu = iris_archive.open(path)
    sd = itorch.load(path)
    checked = 0
    for name, t in cpu.tensors.items():
        if t.format == fmt:
            check_tensor_on_gpu(torch, sd[name], t, name, **kw)
            checked += 1
    return checked
