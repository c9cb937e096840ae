"""The routes of `callgate serve` by concern, as Datasette lays out its views: each an `async`
function of the app's `Context` and the request (`app.create_app` binds the context).

- `releases`: the index, a model's releases, a release, its attempts and the gate (pages and API);
- `compare`: two releases side by side, or a suite's models;
- `labelling`: a calibration set's labelling queue and its writes (label, undo, adjudicate);
- `run_labels`: labelling a run's judged attempts into a set, and its audit sample;
- `calibration`: a set's progress and review, and certificates.
"""
