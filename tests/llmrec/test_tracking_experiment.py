"""Two runs (e.g. two cluster jobs of one study) creating the same MLflow experiment at once: the one that loses the
race uses the experiment the other created (test_two_jobs_compare_in_one_experiment failed on it once)."""

from __future__ import annotations

import threading

from llmrec import tracking


def test_a_run_that_loses_the_create_race_uses_the_other_runs_experiment(tmp_path, monkeypatch):
    client = tracking.client(f"sqlite:///{tmp_path / 'mlruns.db'}")
    real_get = client.get_experiment_by_name
    both_looked = threading.Barrier(2)

    def get_then_wait(name):  # both runs look before either creates: the race, every time
        exp = real_get(name)
        if exp is None:
            both_looked.wait(timeout=30)
        return exp

    monkeypatch.setattr(client, "get_experiment_by_name", get_then_wait)
    ids, errors = [], []

    def one_run():
        try:
            ids.append(tracking.ensure_experiment(client, "study", str(tmp_path / "art"), ("accuracy",)))
        except Exception as e:  # noqa: BLE001 - what the old code raised (RESOURCE_ALREADY_EXISTS)
            errors.append(e)

    runs = [threading.Thread(target=one_run) for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join(timeout=60)
    assert errors == [] and len(ids) == 2 and ids[0] == ids[1]
    assert len(client.search_experiments(filter_string="name = 'study'")) == 1
