"""Host GPU kernel model: physical behaviour and cross-validated accuracy of the fitted tables."""

from __future__ import annotations

import csv
import itertools
import time
from importlib.resources import files

import pytest

from specpim_cp.errors import ScenarioError
from specpim_cp.kernels import (
    TOKEN_RANGES,
    allreduce_us,
    fit_report,
    format_fit_report,
    known_gpus,
    linear_time_us,
    memory_floor,
    predict_linear_us,
)
from specpim_cp.kernels import linear as linear_module

GPUS = ["a100", "h100", "a40"]
A100_PEAK_GBPS = 2039.0  # NVIDIA A100 80 GB SXM datasheet

# Accuracy achieved by the model (formulations/physics.md P5); regression guards with ~1 point margin.
ACHIEVED_MEDIAN, ACHIEVED_P90 = 0.09, 0.23
ACHIEVED_EXTRAPOLATION_MEDIAN, ACHIEVED_EXTRAPOLATION_P90 = 0.125, 0.28
# The accuracy asked for, which this data does not support for unseen shapes (formulations/physics.md P5).
TARGET_MEDIAN, TARGET_P90 = 0.03, 0.10


@pytest.fixture(scope="module")
def report():
    return {r.gpu: r for r in fit_report()}


def test_known_gpus_and_unknown_gpu_error():
    assert set(GPUS) <= set(known_gpus())
    for call in (
        lambda: predict_linear_us("tpu-v9", 4096, 4096, 1),
        lambda: linear_time_us("tpu-v9", 4096, 4096, 1),
        lambda: memory_floor("nope"),
    ):
        with pytest.raises(ScenarioError, match="a100.*h100|h100.*a100"):
            call()


def test_fit_report_has_every_gpu_range_and_the_extrapolation_check(report):
    assert set(report) == set(known_gpus())
    for r in report.values():
        assert r.models >= 4 and r.points > 1000
        assert [(b.first_tokens, b.last_tokens) for b in r.by_tokens] == list(TOKEN_RANGES)
        assert sum(b.points for b in r.by_tokens) == r.points
        assert (r.extrapolation.first_tokens, r.extrapolation.last_tokens) == (257, 512)
        assert r.extrapolation.points == r.by_tokens[-1].points
        for e in (r, *r.by_tokens, r.extrapolation):
            assert 0 <= e.median_abs_rel_error <= e.p90_abs_rel_error
    table = format_fit_report(list(report.values()))
    for text in ("a100", "h100", "a40", "1-16", "257-512", "extrap", "%"):
        assert text in table


@pytest.mark.parametrize("gpu", GPUS)
def test_cross_validated_error_holds_the_achieved_level(report, gpu):
    r = report[gpu]
    assert r.median_abs_rel_error <= ACHIEVED_MEDIAN
    assert r.p90_abs_rel_error <= ACHIEVED_P90
    assert r.extrapolation.median_abs_rel_error <= ACHIEVED_EXTRAPOLATION_MEDIAN
    assert r.extrapolation.p90_abs_rel_error <= ACHIEVED_EXTRAPOLATION_P90


@pytest.mark.xfail(strict=True, reason="median <= 3 %, p90 <= 10 % not reachable on this data; see linear.py")
@pytest.mark.parametrize("gpu", GPUS)
def test_cross_validated_error_meets_the_target(report, gpu):
    assert report[gpu].median_abs_rel_error <= TARGET_MEDIAN
    assert report[gpu].p90_abs_rel_error <= TARGET_P90


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
    assert abs(pred - measured) / measured <= 0.10


def test_tensor_parallel_splits_out_features():
    whole = predict_linear_us("a100", 8192, 28672, 64, tensor_parallel=4)
    assert whole == pytest.approx(linear_time_us("a100", 8192, 28672 // 4, 64))
    assert predict_linear_us("a100", 8192, 28672, 64) > whole


_FEATURES = [1, 7, 64, 100, 513, 1000, 2560, 4096, 5000, 11008, 22016, 30000]
_TOKENS = [1, 2, 3, 8, 15, 16, 17, 63, 64, 65, 100, 128, 129, 200, 256, 257, 384, 511, 512, 513, 576, 1000,
           2048]


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("scale", [1.0, 0.4])
def test_monotone_in_tokens_and_features(gpu, scale):
    def t(n_in, n_out, tokens):
        return linear_time_us(gpu, n_in, n_out, tokens, scale)

    for n_in, n_out in [(1024, 1024), (4096, 4096), (4096, 11008), (8192, 28672), (5120, 1920)]:
        times = [t(n_in, n_out, m) for m in range(1, 1025)]
        assert all(b >= a for a, b in itertools.pairwise(times)), (n_in, n_out)
    for tokens, fixed in itertools.product(_TOKENS, _FEATURES):
        along_in = [t(n, fixed, tokens) for n in _FEATURES]
        along_out = [t(fixed, n, tokens) for n in _FEATURES]
        assert all(b >= a for a, b in itertools.pairwise(along_in)), (tokens, fixed)
        assert all(b >= a for a, b in itertools.pairwise(along_out)), (tokens, fixed)


@pytest.mark.parametrize("gpu", GPUS)
def test_extrapolation_beyond_512_tokens_grows_like_compute(gpu):
    t512 = linear_time_us(gpu, 8192, 8192, 512)
    t1024 = linear_time_us(gpu, 8192, 8192, 1024)
    assert 1.5 * t512 <= t1024 <= 2.2 * t512
    assert linear_time_us(gpu, 8192, 8192, 576) > t512  # 64 x 9 tokens: one more row of tiles


@pytest.mark.parametrize("gpu", GPUS)
def test_halving_bandwidth_doubles_the_memory_time_of_a_weight_streaming_layer(gpu):
    t0, _ = memory_floor(gpu)
    full = linear_time_us(gpu, 8192, 8192, 1, bandwidth_scale=1.0)
    half = linear_time_us(gpu, 8192, 8192, 1, bandwidth_scale=0.5)
    assert (half - t0) / (full - t0) == pytest.approx(2.0, rel=0.05)


def test_compute_bound_layer_barely_depends_on_bandwidth():
    full = linear_time_us("a100", 8192, 28672, 512, bandwidth_scale=1.0)
    assert linear_time_us("a100", 8192, 28672, 512, bandwidth_scale=0.9) == pytest.approx(full, rel=0.02)
    assert linear_time_us("a100", 8192, 28672, 512, bandwidth_scale=0.5) == pytest.approx(full, rel=0.10)
    # more bandwidth than measured helps only the memory-bound layer
    assert linear_time_us("a100", 8192, 28672, 512, bandwidth_scale=1.2) <= full
    assert linear_time_us("a100", 8192, 28672, 1, bandwidth_scale=1.2) < 0.9 * linear_time_us(
        "a100", 8192, 28672, 1
    )


def test_scale_one_is_the_fit():
    for tokens in (1, 16, 128, 512):
        assert linear_time_us("a100", 4096, 11008, tokens) == predict_linear_us("a100", 4096, 11008, tokens)


def test_a100_streams_100mb_at_realistic_bandwidth():
    n_in, n_out = 8192, 6104  # ~100 MB of FP16 weights
    bw_gbps = 2 * n_in * n_out / linear_time_us("a100", n_in, n_out, 1) / 1e3
    assert 0.5 * A100_PEAK_GBPS <= bw_gbps <= A100_PEAK_GBPS
    t0, eff_bw = memory_floor("a100")
    assert 0 < t0 < 20
    assert 0.5 * A100_PEAK_GBPS <= eff_bw <= A100_PEAK_GBPS


def test_faster_memory_gpu_is_faster_at_one_token():
    assert (linear_time_us("h100", 8192, 8192, 1) < linear_time_us("a100", 8192, 8192, 1)
            < linear_time_us("a40", 8192, 8192, 1))


def test_linear_argument_errors():
    bad_calls = [
        lambda: linear_time_us("a100", 4096, 4096, 1, bandwidth_scale=0.0),
        lambda: linear_time_us("a100", 4096, 4096, 1, bandwidth_scale=-1.0),
        lambda: linear_time_us("a100", 4096, 4096, 0),
        lambda: linear_time_us("a100", 0, 4096, 1),
        lambda: linear_time_us("a100", 4096, 0, 1),
        lambda: linear_time_us("a100", 4096, 4096, 1.5),
        lambda: linear_time_us("a100", 4096.5, 4096, 1),
        lambda: predict_linear_us("a100", 4096, 4096, 0),
        lambda: predict_linear_us("a100", 4096, 4096, 1, tensor_parallel=0),
    ]
    for call in bad_calls:
        with pytest.raises(ValueError):
            call()


@pytest.mark.parametrize("gpu", GPUS)
def test_scalar_path_matches_the_fitted_vector_path(gpu):
    rows = linear_module._load()[gpu]
    model = linear_module._fitted(gpu)
    vector = linear_module._Design.of(rows).predict_us(model)
    for i in range(0, len(rows.tokens), 37):
        k, n, m = int(rows.in_features[i]), int(rows.out_features[i]), int(rows.tokens[i])
        assert linear_time_us(gpu, k, n, m) == pytest.approx(vector[i], rel=1e-12)


def test_fit_is_deterministic():
    rows = linear_module._load()["h100"]
    assert linear_module._fit(rows, 132) == linear_module._fit(rows, 132) == linear_module._fitted("h100")


def test_single_prediction_is_cheap():
    uncached = linear_time_us.__wrapped__
    uncached("a100", 4096, 4096, 1)  # fit outside the timing
    shapes = [(4096, 4096), (8192, 28672), (5120, 1920)]
    start = time.perf_counter()
    calls = 0
    for tokens in range(1, 577, 3):
        for n_in, n_out in shapes:
            uncached("a100", n_in, n_out, tokens, 0.7)
            calls += 1
    assert (time.perf_counter() - start) / calls < 50e-6  # ~8 us on a laptop core; the target is 20 us


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
