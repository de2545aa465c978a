"""One data folder (issue "A newcomer's first hour"): the loaders, the experiments and the CLI
read MNIST, Adult, SLICE, YEAR and the regression streams from ``--data-dir``,
``TORCHBOOST_DATA`` or the default, and a missing data set says what to put where."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchboost.data import load_adult, load_mnist, load_slice, load_year
from torchboost.data.folder import DATA_ENV, add_data_dir_option, data_dir, dataset_path

ROOT = Path(__file__).resolve().parents[2]


def test_the_folder_is_the_given_one_then_the_environment_then_a_default(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert data_dir(tmp_path / "given") == tmp_path / "given"
    assert data_dir() == tmp_path / "env"
    monkeypatch.delenv(DATA_ENV)
    assert data_dir() in (ROOT.parent / "shared" / "data", Path.home() / "torchboost-data")


@pytest.mark.parametrize(("load", "name", "place"), [
    (load_mnist, "mnist", "mnist"), (load_adult, "adult", "adult"),
    (load_slice, "slice", "slice"), (load_year, "year", "year")])
def test_a_loader_without_a_path_names_what_to_put_where(load, name, place, tmp_path,
                                                        monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError) as error:
        load()
    message = str(error.value)
    assert str(tmp_path / place) in message and DATA_ENV in message and "--data-dir" in message


def test_a_loader_without_a_path_reads_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    (tmp_path / "year").mkdir()
    rows = [[2000 + i % 10] + [0.1 * (i + j) for j in range(90)] for i in range(30)]
    (tmp_path / "year" / "YearPredictionMSD.txt").write_text(
        "\n".join(",".join(str(v) for v in row) for row in rows))
    ds = load_year(n_train=20)
    assert (len(ds.y_train), len(ds.y_test), ds.x_train.shape[1]) == (20, 10, 90)
    with pytest.raises(ValueError, match="no place in the data folder for 'nope'"):
        dataset_path("nope")


def test_a_scripts_data_dir_option_sets_the_folder_for_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, "before")  # put back as it was after the test
    parser = argparse.ArgumentParser()
    add_data_dir_option(parser)
    args = parser.parse_args(["--data-dir", str(tmp_path)])
    assert args.data_dir == tmp_path and data_dir() == tmp_path  # set for the process


def test_the_cli_and_an_experiment_read_the_given_folder(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("name: t\ndataset: kin40k\n")
    env = {k: v for k, v in os.environ.items() if k != DATA_ENV}
    done = subprocess.run([sys.executable, "-m", "torchboost", "run", str(config),
                           "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and str(tmp_path / "data" / "regression") in done.stderr
    done = subprocess.run([sys.executable, "experiments/prediction_bounds.py", "--streams",
                           "pol", "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and "regression/pol.csv.gz not found" in done.stderr
