import math

from cnnbench import results


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    results.atomic_write_text(path, "one")
    results.atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in path.parent.iterdir()] == ["a.txt"]


def test_rows_append_resume_and_replace_errors(tmp_path):
    f = results.ResultsFile(tmp_path / "r.csv", key=["model", "batch_size"])
    f.append({"model": "resnet18", "batch_size": 32, "status": "ok", "throughput_img_s": 12.5})
    f.append({"model": "resnet18", "batch_size": 64, "status": "error", "error": "boom"})
    f.append({"model": "resnet18", "batch_size": 128, "status": "oom", "throughput_img_s": math.nan})
    assert f.done({"model": "resnet18", "batch_size": 32})
    assert f.done({"model": "resnet18", "batch_size": 128})
    assert not f.done({"model": "resnet18", "batch_size": 64})  # errors are measured again
    f.append({"model": "resnet18", "batch_size": 64, "status": "ok", "throughput_img_s": 20.0})
    rows = f.rows()
    assert [(r["batch_size"], r["status"]) for r in rows] == [("32", "ok"), ("128", "oom"), ("64", "ok")]
    assert rows[1]["throughput_img_s"] == "" and rows[0]["schema_version"] == "1"
    assert "error" in rows[0]  # union of columns


def test_json_round_trip_turns_nan_into_null(tmp_path):
    results.write_json(tmp_path / "e.json", {"a": 1, "b": float("nan")})
    assert results.read_json(tmp_path / "e.json") == {"a": 1, "b": None}
