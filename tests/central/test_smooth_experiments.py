

def test_low_dimensional_comparison_quick_run(tmp_path: Path) -> None:
    pytest.importorskip("sklearn", reason="scikit-learn (extra [experiments]) ships the WDBC data")
    result = subprocess.run([sys.executable, str(ROOT / "experiments" / "smooth_lowdim.py"), "--quick",
                             "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(open(tmp_path / "summary.csv")))
    datasets = {r["dataset"] for r in rows}
    assert {"wdbc mean radius", "wdbc mean radius x mean texture"} <= datasets
    for r in rows:
        for mechanism in ("E", "smooth", "laplace"):
            assert 0.0 <= float(r[mechanism]) < 0.5
    if "adult age" in datasets:      # Adult is read from ../shared/data when present (else skipped with a message)
        assert (tmp_path / "adult_age.png").stat().st_size > 1000
    else:
        assert "skipping Adult" in result.stderr
