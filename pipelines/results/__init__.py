"""The results room: everything that reads finished run and suite directories.

Runs are opened once, as :class:`~llmrec.pipelines.results.stored.StoredRun` (``open_runs``), and each read verb —
leaderboard, compare, report, view, judges, rejudge's source — renders them. The write path
(``llmrec.pipelines.runner``) never imports this package.
"""
