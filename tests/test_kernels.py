"""Host GPU kernel model: physical behaviour and cross-validated accuracy of the fitted tables."""

from __future__ import annotations

import csv
import itertools
from importlib.resources import files

import pytest

from specpim_cp.kernels import (
    allreduce_us,
    fit_report,
    format_fit_report,
    known_gpus,
    linear_time_us,
    memory_floor,
    predict_linear_us,
)

A100_PEAK_GBPS = 2039.0


def _fp16_bytes(n_in: int, n_out: int) -> float:
    return 2.0 * n_in * n_out


def test_known_gpus_and_unknown_gpu_error():
    assert {"a100", "h100", "a40"} <= set(known_gpus())
    with pytest.raises(ValueError, match="a100"):
        predict_linear_us("tpu-v9", 4096, 4096, 1)
    with pytest.raises(ValueError, match="h100"):
        memory_floor("nope")


def test_a100_leave_one_model_out_median_error_within_10_percent():
    rows = {r.gpu: r for r in fit_report()}
    assert set(rows) == set(known_gpus())
    a100 = rows["a100"]
    assert a100.models >= 3 and a100.points > 1000
    assert a100.median_abs_rel_error <= 0.10
    assert a100.p90_abs_rel_error >= a100.median_abs_rel_error
    table = format_fit_report(list(rows.values()))
    assert "a100" in table and "%" in table


# (source model, tp, op, in, out, tokens, measured us) rows of the A100 table (a held-in shape).
_A100_ROWS = [
    ("meta-llama/Llama-2-7b-hf", 1, "mlp_up", 4096, 22016, 1, 116.0),
    ("meta-llama/Llama-2-7b-hf", 1, "mlp_up", 4096, 22016, 256, 229.0),
    ("meta-llama/Llama-2-7b-hf", 1, "mlp_down", 11008, 4096, 1, 60.0),
    ("meta-llama/Llama-2-7b-hf", 1, "o_proj", 4096, 4096, 512, 88.0),
]


def test_rows_are_from_the_table():
    table = (files("specpim_cp.kernels") / "data" / "gpu_linear_measured.csv").read_text()
    present = {
        (
            r["source_model"],
            int(r["tensor_parallel"]),
            r["op"],
            int(r["in_features"]),
            int(r["out_features"]),
            int(r["num_tokens"]),
            float(r["median_us"]),
        )
        for r in csv.DictReader(table.splitlines())
        if r["gpu"] == "a100"
    }
    assert set(_A100_ROWS) <= present


@pytest.mark.parametrize("row", _A100_ROWS, ids=lambda r: f"{r[2]}-{r[5]}tok")
def test_predict_close_to_measured_points(row):
    _, tp, _, n_in, n_out, tokens, measured = row
    pred = predict_linear_us("a100", n_in, n_out, tokens, tensor_parallel=tp)
    assert abs(pred - measured) / measured <= 0.15


def test_tensor_parallel_divides_weight_bytes():
    whole = predict_linear_us("a100", 8192, 28672, 1, tensor_parallel=4)
    shard = predict_linear_us("a100", 8192, 28672 // 4, 1)
    assert whole == pytest.approx(shard)


@pytest.mark.parametrize("gpu", ["a100", "h100", "a40"])
def test_monotone_in_tokens_and_bytes(gpu):
    sizes = [(1024, 1024), (4096, 4096), (4096, 11008), (8192, 28672)]
    for n_in, n_out in sizes:
        w = _fp16_bytes(n_in, n_out)
        prev = 0.0
        for tokens in range(1, 1025):
            t = linear_time_us(gpu, w, tokens)
            assert t >= prev - 1e-9, (n_in, n_out, tokens)
            prev = t
    for tokens in (1, 7, 64, 300, 512, 1024):
        prev = 0.0
        for mb in (0.5, 1, 4, 16, 64, 128, 256, 512, 1024):
            t = linear_time_us(gpu, mb * 1e6, tokens)
            assert t >= prev - 1e-9, (tokens, mb)
            prev = t


def test_extrapolation_beyond_512_tokens_grows_like_compute():
    w = _fp16_bytes(8192, 8192)
    t512 = linear_time_us("a100", w, 512)
    t1024 = linear_time_us("a100", w, 1024)
    assert 1.5 * t512 <= t1024 <= 2.2 * t512


def test_halving_bandwidth_doubles_memory_bound_time():
    w = _fp16_bytes(8192, 8192)
    t0, _ = memory_floor("a100")
    full = linear_time_us("a100", w, 1, bandwidth_scale=1.0)
    half = linear_time_us("a100", w, 1, bandwidth_scale=0.5)
    assert (half - t0) / (full - t0) == pytest.approx(2.0, rel=0.15)


def test_compute_bound_layer_insensitive_to_small_bandwidth_loss():
    w = _fp16_bytes(8192, 8192)
    full = linear_time_us("a100", w, 512, bandwidth_scale=1.0)
    reduced = linear_time_us("a100", w, 512, bandwidth_scale=0.9)
    assert reduced == pytest.approx(full, rel=0.02)


def test_scale_one_equals_fit_unless_floor_above():
    for tokens in (1, 16, 128, 512):
        fit = predict_linear_us("a100", 4096, 11008, tokens)
        t = linear_time_us("a100", _fp16_bytes(4096, 11008), tokens)
        assert t >= fit
        assert t == pytest.approx(fit, rel=0.05)


def test_a100_streams_100mb_at_realistic_bandwidth():
    w = 100e6
    bw_gbps = w / linear_time_us("a100", w, 1) / 1e3
    assert 0.5 * A100_PEAK_GBPS <= bw_gbps <= A100_PEAK_GBPS
    t0, eff_bw = memory_floor("a100")
    assert 0 < t0 < 20
    assert 0.5 * A100_PEAK_GBPS <= eff_bw <= A100_PEAK_GBPS


def test_faster_memory_gpu_is_faster_at_one_token():
    w = _fp16_bytes(8192, 8192)
    assert linear_time_us("h100", w, 1) < linear_time_us("a100", w, 1) < linear_time_us("a40", w, 1)


def test_linear_argument_errors():
    with pytest.raises(ValueError):
        linear_time_us("a100", 1e6, 1, bandwidth_scale=0.0)
    with pytest.raises(ValueError):
        linear_time_us("a100", 1e6, 1, bandwidth_scale=-1.0)
    with pytest.raises(ValueError):
        linear_time_us("a100", 1e6, 0)
    with pytest.raises(ValueError):
        predict_linear_us("a100", 4096, 4096, 0)


def test_allreduce_one_worker_is_free():
    assert allreduce_us(1, 10**6) == 0.0
    with pytest.raises(ValueError):
        allreduce_us(0, 1024)


def test_allreduce_increasing_in_size_and_workers():
    sizes = [2**k for k in range(8, 32)]  # 256 .. 2G elements (beyond the table's 536 M)
    for workers in (2, 4, 8):
        times = [allreduce_us(workers, s) for s in sizes]
        assert all(b >= a for a, b in itertools.pairwise(times)), workers
        assert times[-1] > 10 * times[0]
    for s in sizes:
        assert allreduce_us(4, s) >= allreduce_us(2, s)
        assert allreduce_us(8, s) >= allreduce_us(4, s)
    # beyond the largest measured size the time keeps growing roughly linearly (bandwidth term)
    assert allreduce_us(2, 2**31) == pytest.approx(2 * allreduce_us(2, 2**30), rel=0.1)
