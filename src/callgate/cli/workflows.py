"""The GitHub Actions workflows `callgate init` writes, split the way a release ships:

- `callgate.yml`, on pull requests: gates the pull request's head commit (the release label is
  that commit, not the merge commit `github.sha` names on `pull_request`) against the baseline
  kept on the default branch *now*, read-only: nothing is committed, and a fork's read-only
  token only skips the comment.
- `callgate-release.yml`, on a push to the default branch: gates the commit that shipped and
  commits its scores file to `releases/` there, one run at a time (`concurrency:`), so "the
  last release" is what shipped.
- `callgate-sharded.yml`, run by hand: the live run split over a job matrix.

All of them install callgate through its action (`uses: OWNER/callgate@COMMIT`): callgate at
that commit, every dependency at the version its uv.lock pins.
"""

from __future__ import annotations

PLACEHOLDER_ACTION = "OWNER/callgate@COMMIT"

_HEAD = '''\
# callgate's GitHub Action, pinned to a commit: {action}
# (callgate's repository and a commit, e.g. acme/callgate@1a2b3c4d...). It installs callgate
# at that commit with every dependency at the version callgate's uv.lock pins, so a verdict
# never moves because a library did.
'''

PULL_REQUEST = _HEAD + '''\
name: tool-calling gate
on:
  pull_request:
permissions:
  contents: read
  pull-requests: write  # the one comment; a fork's read-only token skips it with a notice
jobs:
  gate:
    runs-on: ubuntu-latest
    steps:
      # The commit under test is the pull request's head, not the merge commit github.sha
      # names on pull_request: the release label is the commit that was tested.
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      # The baseline is the last release kept on the default branch as it is now (a pull
      # request merged meanwhile moved it), never the pull request's own releases/.
      - name: The last kept release, from the default branch
        env:
          BASE_REF: ${{ github.event.pull_request.base.ref }}
        run: |
          git fetch --no-tags --depth=1 origin "$BASE_REF"
          mkdir -p "$RUNNER_TEMP/baseline/releases"
          git archive FETCH_HEAD releases | tar -x -C "$RUNNER_TEMP/baseline"
      # --agent names what you ship and is gated along; --model is the model id that answered:
      # change it and the gate compares with my-agent's last release and names the change.
      # To ask the model itself, drop `responses`, set `model: my-agent` (callgate.toml) and
      # pass the key: env: OPENROUTER_API_KEY: ${{ secrets.OPENROUTER_API_KEY }}.
      - uses: {action}
        with:
          suite: {suite}
          responses: {responses}
          agent: my-agent
          model: example/travel-agent
          baseline: ${{ runner.temp }}/baseline/releases/
'''

RELEASE = _HEAD + '''\
name: tool-calling release
on:
  push:
    branches: [main]  # your default branch; or `release: types: [published]`
    paths-ignore: ["releases/**"]
permissions:
  contents: write  # commits releases/<commit>.json to the default branch
concurrency:
  group: callgate-release  # one release at a time: each gates against the one before
  cancel-in-progress: false
jobs:
  release:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0  # the rebase below needs history if the branch moved meanwhile
      - uses: {action}
        with:
          suite: {suite}
          responses: {responses}
          agent: my-agent
          model: example/travel-agent
          baseline: releases/
          scores-out: releases/${{ github.sha }}.json
          comment: "false"
      - name: Keep the scores with the release, on the default branch
        env:
          RELEASE_SHA: ${{ github.sha }}
        run: |
          git config user.name callgate
          git config user.email callgate@users.noreply.github.com
          git add "releases/$RELEASE_SHA.json"
          git commit -m "callgate scores for $RELEASE_SHA"
          git pull --rebase origin "$GITHUB_REF_NAME"
          git push origin "HEAD:$GITHUB_REF_NAME"
'''

# The same gate when a live run outgrows one runner: N shard jobs each ask the model for their
# share of the cases (a hash of the case id), a gate job merges the stores and gates the union.
SHARDED = _HEAD + '''\
name: tool-calling gate, sharded
# Run by hand until the suite outgrows one runner; then give it callgate.yml's `on:` and
# remove that one.
on: [workflow_dispatch]
permissions:
  contents: read
jobs:
  shard:
    runs-on: ubuntu-latest
    strategy:
      fail-fast: false
      matrix:
        shard: [1, 2, 3, 4]
    steps:
      - uses: actions/checkout@v4
      - uses: {install}
      - name: Ask the candidate model, this shard's cases only
        env:
          OPENROUTER_API_KEY: ${{ secrets.OPENROUTER_API_KEY }}
        run: >
          callgate run {suite} --model my-agent --repeats 3 --release "${{ github.sha }}"
          --shard ${{ matrix.shard }}/4 --db shard.db
      - uses: actions/upload-artifact@v4
        with:
          name: store-${{ matrix.shard }}
          path: shard.db
  gate:
    needs: shard
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: {install}
      - uses: actions/download-artifact@v4
        with:
          pattern: store-*
          path: stores
      - name: Merge the shards into one release
        run: callgate merge callgate.db stores/store-*/shard.db
      - name: Gate (inconclusive, exit 3, if a shard is missing)
        run: >
          callgate gate --agent my-agent --release "${{ github.sha }}"
          --baseline releases/ --scores-out "releases/${{ github.sha }}.json"
          --junit junit.xml --markdown summary.md
      - name: An HTML report of the merged release
        if: always()
        run: >
          callgate report --html report.html --agent my-agent --release "${{ github.sha }}"
          --baseline releases/
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: scores-and-report
          path: |
            releases/
            report.html
            summary.md
'''


def action_ref(source: str | None) -> str:
    """`OWNER/REPO@COMMIT` for a callgate installed from a GitHub repository pinned to a commit
    (`git+https://github.com/OWNER/REPO@COMMIT`), else the placeholder to fill in."""
    prefix = "git+https://github.com/"
    if not source or not source.startswith(prefix) or "@" not in source:
        return PLACEHOLDER_ACTION
    path, _, commit = source[len(prefix):].rpartition("@")
    path = path.removesuffix(".git").strip("/")
    if path.count("/") != 1 or not commit:
        return PLACEHOLDER_ACTION
    return f"{path}@{commit}"


def workflows(action: str, suite: str, responses: str) -> dict[str, str]:
    """Relative path -> text of each workflow, using the action at `action`."""
    owner_repo, _, ref = action.partition("@")
    fill = {"{action}": action, "{install}": f"{owner_repo}/install@{ref}",
            "{suite}": suite, "{responses}": responses}

    def filled(text: str) -> str:
        for name, value in fill.items():
            text = text.replace(name, value)
        return text

    return {".github/workflows/callgate.yml": filled(PULL_REQUEST),
            ".github/workflows/callgate-release.yml": filled(RELEASE),
            ".github/workflows/callgate-sharded.yml": filled(SHARDED)}
