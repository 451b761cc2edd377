"""tools/qr_bench_join.py on small fixtures: the goal table cell by cell, the
verdicts at and past each bound, the join of qr-bench's rows with torch's
(bf16cast on bf16, refused ops, the best torch op), the report, the command
line, and the two CSV formats it reads against their writers
(tools/bench_report.cc's CsvHeader, python/bench/symm_mem_bench.py's CsvOut)."""
import importlib.util
import os
import re
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
import qr_bench_join as j  # noqa: E402

BENCH = os.path.join(_HERE, "testdata", "qr_bench_join_bench.csv")
SYMM = os.path.join(_HERE, "testdata", "qr_bench_join_symm.csv")
JSON = os.path.join(_HERE, "testdata", "qr_bench_fixture.json")
K, M = 1 << 10, 1 << 20


def _symm_bench_module():
    spec = importlib.util.spec_from_file_location(
        "symm_mem_bench", os.path.join(_ROOT, "python", "bench", "symm_mem_bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports no torch at module level
    return mod


@pytest.mark.parametrize("nbytes,regime,ratio,link", [
    (4 * K, "FP", 0.40, None),
    (256 * K, "FP", 0.40, None),
    (256 * K, "INT4", 0.40, None),   # every codec = FP
    (256 * K, "INT3", 0.40, None),
    (1 * M, "INT8", 0.40, None),
    (2 * M, "INT6", 0.40, None),
    (4 * M, "INT4", 0.35, None),
    (1 * M, "INT3", 0.35, None),
    (64 * M, "FP", 0.85, 90.0),
    (64 * M, "INT8", 0.50, 90.0),
    (256 * M, "INT6", 0.40, 90.0),
    (256 * M, "INT4", 0.25, 90.0),
    (64 * M, "INT3", 0.21, 90.0),
    (128 * M, "INT4", None, 90.0),   # >= 64 MiB: the link goal alone
    (1024 * M, "FP", None, 90.0),
])
def test_goal_table(nbytes, regime, ratio, link):
    g = j.goal(nbytes, regime)
    assert g is not None
    assert g[0] == ratio and g[1] == link


@pytest.mark.parametrize("nbytes", [512 * K, 8 * M, 16 * M, 32 * M, 1 * M - 16, 4 * M + 16])
def test_sizes_between_the_bands_have_no_goal(nbytes):
    assert j.goal(nbytes, "FP") is None


def test_goals_are_graph_mode_at_world_size_two_only():
    assert j.goal(64 * M, "FP", mode="eager") is None
    assert j.goal(64 * M, "FP", world_size=4) is None
    assert j.goal(64 * M, "-") is None  # an NCCL row has no regime


def test_small_codecs_say_they_are_held_to_fp():
    assert "(= FP)" in j.goal(256 * K, "INT8")[2]
    assert "(= FP)" not in j.goal(256 * K, "FP")[2]
    assert j.goal(64 * M, "INT4")[2] == "<= 0.25, link >= 90 %"


def test_verdict_bounds():
    g = j.goal(64 * M, "INT8")  # <= 0.50, link >= 90
    assert j.verdict(g, 0.50, 90.0) == ("pass", True)
    assert j.verdict(g, 0.501, 95.0) == ("FAIL: 0.50 > 0.50", False)
    assert j.verdict(g, 0.40, 89.9) == ("FAIL: link 90 % < 90 %", False)
    text, ok = j.verdict(g, 0.6, 80.0)
    assert ok is False and "0.60 > 0.50" in text and "link 80 %" in text
    assert j.verdict(g, None, 95.0) == ("no data: no NCCL", None)
    assert j.verdict(g, 0.3, None) == ("no data: no link limit", None)
    # A failure wins over missing data.
    assert j.verdict(g, 0.9, None)[1] is False
    # The link goal alone needs no NCCL.
    assert j.verdict(j.goal(1024 * M, "FP"), None, 91.0) == ("pass", True)


@pytest.fixture
def joined():
    rows, ws = j.read_bench(BENCH)
    assert ws is None  # a CSV does not say
    return {(r["bytes"], r["dtype"], r["regime"]): r for r in j.join(rows, j.read_symm(SYMM))}


def test_join_takes_the_graph_policy_rows_only(joined):
    assert len(joined) == 11
    assert all(r["pick"] in ("one-shot", "two-shot") for r in joined.values())


def test_join_verdicts_on_the_fixture(joined):
    want = {
        (256 * K, "fp16", "FP"): True,      # 0.40 at the bound
        (256 * K, "fp16", "INT8"): False,   # 0.50 > 0.40 (= FP)
        (256 * K, "fp16", "INT4"): True,
        (2 * M, "bf16", "FP"): True,
        (2 * M, "bf16", "INT4"): False,     # 0.36 > 0.35
        (2 * M, "bf16", "INT3"): True,      # 0.35
        (2 * M, "bf16cast", "FP"): False,   # 0.45 > 0.40
        (64 * M, "fp16", "FP"): True,       # 0.75, link 95 %
        (64 * M, "fp16", "INT8"): False,    # 0.45 but link 85 %
        (1024 * M, "bf16", "FP"): True,     # link 92 %, no NCCL needed
    }
    for key, ok in want.items():
        assert joined[key]["passed"] is ok, (key, joined[key]["verdict"])
    assert joined[(16 * M, "fp16", "FP")]["has_goal"] is False
    assert joined[(16 * M, "fp16", "FP")]["verdict"] == "-"
    assert joined[(64 * M, "fp16", "INT8")]["verdict"] == "FAIL: link 85 % < 90 %"


def test_join_ratios_and_best_torch_op(joined):
    r = joined[(2 * M, "bf16", "FP")]
    assert r["ratio_nccl"] == pytest.approx(0.40)
    assert r["best_torch"] == "2-shot" and r["ratio_torch"] == pytest.approx(8.0 / 12.0)
    # bf16cast is compared with torch's bf16.
    c = joined[(2 * M, "bf16cast", "FP")]
    assert c["torch"]["torch-two-shot"]["us"] == 12.0
    assert c["ratio_torch"] == pytest.approx(9.0 / 12.0)
    # A failed op is not the best; the one that ran is.
    g = joined[(1024 * M, "bf16", "FP")]
    assert g["best_torch"] == "1-shot" and g["ratio_torch"] == pytest.approx(5000.0 / 6000.0)
    assert g["ratio_nccl"] is None
    # Refused everywhere: no torch ratio, the refusal kept.
    f = joined[(64 * M, "fp16", "FP")]
    assert f["ratio_torch"] is None
    assert f["torch"]["torch-one-shot"]["status"] == "refused"


def test_join_computes_the_ratio_when_the_csv_left_it_out():
    rows = [{"bytes": 4 * K, "dtype": "fp16", "mode": "graph", "algo": "policy", "regime": "FP",
             "us": 3.0, "nccl_us": 10.0, "ratio_vs_nccl": None, "pct_of_link_limit": None,
             "policy_choice": "one-shot"}]
    (r,) = j.join(rows, {})
    assert r["ratio_nccl"] == pytest.approx(0.3) and r["passed"] is True


def test_eager_mode_has_no_goals():
    rows, _ = j.read_bench(BENCH)
    out = j.join(rows, j.read_symm(SYMM), mode="eager")
    assert len(out) == 1 and not out[0]["has_goal"] and out[0]["verdict"] == "-"
    assert out[0]["torch"]["torch-one-shot"]["status"] == "refused"


def test_report_text():
    rows, _ = j.read_bench(BENCH)
    symm = j.read_symm(SYMM)
    text = j.render(j.join(rows, symm), symm, rows, "graph", 2, ("b.csv", "s.csv"))
    table = [l for l in text.splitlines() if l.startswith("| ")]
    header = table[0]
    for col in ("QR µs", "NCCL µs", "torch 1-shot µs", "torch 2-shot µs", "QR/NCCL",
                "QR/torch best", "link %", "goal", "verdict"):
        assert col in header
    # No one-shot-copy rows in the fixture: no column for it.
    assert "1-shot-copy" not in header
    n_cols = header.count("|")
    body = table[1:12]
    assert all(l.count("|") == n_cols for l in body)
    assert ("| 2M | bf16 | INT4 | two-shot | 7.2 | 20.0 | 15.0 | 12.0 | 0.36 | 0.60 (2-shot) | 27 "
            "| <= 0.35 | FAIL: 0.36 > 0.35 |") in text
    assert "| 64M | fp16 | FP | two-shot | 300.0 | 400.0 | refused | refused |" in text
    assert "Goal verdicts: 10 cells with a goal: 6 pass, 4 fail, 0 without data." in text
    assert "- 2M bf16cast FP: FAIL: 0.45 > 0.40" in text
    assert re.search(r"torch-one-shot fp16 refused at 256K, 16M, 64M: .*not implemented for "
                     r"'Half'", text)
    assert "torch-two-shot bf16 failed at 1G" in text
    # The calibration: torch's NCCL over qr-bench's.
    assert "| 2M | bf16 | 20.0 | 21.0 | 1.05 |" in text
    assert "| 64M | fp16 | 400.0 | 410.0 | 1.02 |" in text
    assert "bf16cast rows show torch's bf16 numbers" in text


def test_the_copy_variant_gets_a_column_and_can_be_the_best(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("bytes,dtype,mode,op,status,us,algbw_GBps,calls,reps,detail\n"
                 "2097152,bf16,graph,torch-one-shot,ok,15.000,,50,40,\n"
                 "2097152,bf16,graph,torch-one-shot-copy,ok,10.000,,50,40,\n")
    rows, _ = j.read_bench(BENCH)
    symm = j.read_symm(str(p))
    joined = j.join(rows, symm)
    r = [x for x in joined if x["bytes"] == 2 * M and x["dtype"] == "bf16" and
         x["regime"] == "FP"][0]
    assert r["best_torch"] == "1-shot-copy" and r["ratio_torch"] == pytest.approx(0.8)
    text = j.render(joined, symm, rows, "graph", 2, ("b", "s"))
    header = [l for l in text.splitlines() if l.startswith("| size")][0]
    assert "torch 1-shot µs | torch 1-shot-copy µs | QR/NCCL" in header
    assert "2-shot" not in header  # no two-shot rows: no column
    assert "NCCL timed by both programs" not in text  # no torch-nccl rows


def test_main_writes_the_table(tmp_path, capsys):
    out = tmp_path / "t.md"
    assert j.main([BENCH, SYMM, "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("quickreduce (qr-bench qr_bench_join_bench.csv)")
    assert "world size 2" in text
    assert j.main([BENCH, SYMM]) == 0
    assert capsys.readouterr().out == text


def test_main_reads_qr_bench_json():
    rows, ws = j.read_bench(JSON)
    assert ws == 2
    assert any(r["algo"] == "policy" for r in rows)
    assert j.main([JSON, SYMM, "--out", os.devnull]) == 0


@pytest.mark.parametrize("which", ["bench", "symm"])
def test_main_refuses_the_wrong_file(tmp_path, capsys, which):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    args = [str(bad), SYMM] if which == "bench" else [BENCH, str(bad)]
    assert j.main(args) == 1
    assert "no column" in capsys.readouterr().err


def test_main_errors(tmp_path, capsys):
    assert j.main([str(tmp_path / "missing.csv"), SYMM]) == 1
    assert "cannot read" in capsys.readouterr().err
    broken = tmp_path / "b.json"
    broken.write_text("{")
    assert j.main([str(broken), SYMM]) == 1
    assert "qr-bench JSON" in capsys.readouterr().err
    no_time = tmp_path / "s.csv"
    no_time.write_text("bytes,dtype,mode,op,status,us,detail\n"
                       "4096,bf16,graph,torch-one-shot,ok,,\n")
    assert j.main([BENCH, str(no_time)]) == 1
    assert "ok row without a time" in capsys.readouterr().err
    only_eager = tmp_path / "e.csv"
    with open(BENCH) as f:
        lines = f.read().splitlines()
    only_eager.write_text("\n".join([lines[0]] + [l for l in lines if ",eager," in l]) + "\n")
    assert j.main([str(only_eager), SYMM]) == 1
    assert "no graph-mode policy rows" in capsys.readouterr().err


def test_qr_bench_csv_has_the_columns_the_join_reads():
    with open(os.path.join(_ROOT, "tools", "bench_report.cc")) as f:
        src = f.read()
    m = re.search(r"std::string CsvHeader\(\) \{\s*return ((?:\"[^\"]*\"\s*)+);", src)
    assert m, "CsvHeader() not found in tools/bench_report.cc"
    header = "".join(re.findall(r"\"([^\"]*)\"", m.group(1))).replace("\\n", "")
    columns = header.split(",")
    assert [c for c in j.BENCH_COLUMNS if c not in columns] == []
    with open(BENCH) as f:
        assert f.readline().strip().split(",") == columns  # the fixture is in that format


def test_symm_csv_round_trip_through_its_writer(tmp_path):
    s = _symm_bench_module()
    assert [c for c in j.SYMM_COLUMNS if c not in s.CSV_COLUMNS] == []
    assert {op for op, _ in j.TORCH_OPS} | {j.TORCH_NCCL} == set(s.OPS.values())
    path = tmp_path / "s.csv"
    out = s.CsvOut(str(path))
    out.write(s.make_row((2 * M, "bf16", "graph", "torch-two-shot"), "ok", us=12.5, calls=50,
                         reps=40))
    out.write(s.make_row((2 * M, "fp16", "graph", "torch-two-shot"), "refused",
                         detail='rank 0: NotImplementedError: "x", not for \'Half\''))
    out.close()
    got = j.read_symm(str(path))
    assert got[("graph", "bf16", 2 * M)]["torch-two-shot"] == {"status": "ok", "us": 12.5,
                                                               "detail": ""}
    assert got[("graph", "fp16", 2 * M)]["torch-two-shot"]["detail"] == \
        'rank 0: NotImplementedError: "x", not for \'Half\''
    with open(SYMM) as f:
        assert f.readline().strip().split(",") == s.CSV_COLUMNS
