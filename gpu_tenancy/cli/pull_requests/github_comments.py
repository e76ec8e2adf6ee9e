"""One pull-request comment per subject, updated in place on every push, and the job summary beside it.

GitHub REST API (docs.github.com/en/rest/issues/comments, API version 2022-11-28): a pull request is an
issue, so its conversation comments are issue comments:
- ``GET /repos/{owner}/{repo}/issues/{number}/comments?per_page=100&page=N``: ascending ids, at most 100 a
  page (30 by default), the next page named by the ``Link`` header's ``rel="next"``;
- ``POST /repos/{owner}/{repo}/issues/{number}/comments`` with ``{"body": ...}`` creates one (201);
- ``PATCH /repos/{owner}/{repo}/issues/comments/{id}`` with ``{"body": ...}`` updates one (200).
A comment made with the workflow's GITHUB_TOKEN is authored by ``github-actions[bot]``. A body is at most
65,536 characters. A pull request from a fork gets a read-only token (POST answers 403): there the job
summary (``$GITHUB_STEP_SUMMARY``, at most 1 MiB per step) is the only place the text reaches.

pulumi/actions' own comment (src/libs/pr.ts at v7.0.0) lists only the first page of comments, so past 30
comments it posts a new one each time; this lists every page. Only our own comment carrying the subject's
marker is edited, never somebody else's that happens to quote it.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BOT_LOGIN = "github-actions[bot]"
MAX_COMMENT = 65_536
MAX_SUMMARY = 1 << 20
TIMEOUT = 30


def marker(subject: str) -> str:
    return f"<!-- gpu-tenancy:{subject} -->"


class GitHubError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"GitHub API answered {status}: {message}")
        self.status = status


def _next_link(header: str | None) -> str | None:
    for part in (header or "").split(","):
        match = re.match(r'\s*<([^>]+)>;\s*rel="next"', part)
        if match:
            return match[1]
    return None


# urllib, not a client library: PyGithub adds 31.8 MB in 11 packages, ghapi 12.0 MB in 9, for the ~30 lines of
# HTTP and paging below; the upsert's choice stays ours either way (docs/pull-request-previews.md).
@dataclass
class GitHub:
    api_url: str  # GITHUB_API_URL, e.g. https://api.github.com
    token: str
    repository: str  # owner/name

    def _request(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> tuple[Any, Mapping[str, str]]:
        request = urllib.request.Request(
            url,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self.token}",
                "X-GitHub-Api-Version": "2022-11-28",
                **({"Content-Type": "application/json"} if body is not None else {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                return json.loads(response.read() or b"null"), dict(response.headers)
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            raise GitHubError(error.code, detail) from None

    def comments(self, number: int) -> Iterator[dict[str, Any]]:
        url: str | None = f"{self.api_url}/repos/{self.repository}/issues/{number}/comments?per_page=100"
        while url:
            page, headers = self._request("GET", url)
            yield from page
            url = _next_link(headers.get("Link") or headers.get("link"))

    def upsert(self, number: int, subject: str, body: str) -> str:
        """Create or update our comment for ``subject``; returns "created" or "updated"."""
        tag = marker(subject)
        text = f"{tag}\n{body}"
        if len(text) > MAX_COMMENT:
            raise ValueError(f"comment for {subject} has {len(text)} characters, GitHub takes {MAX_COMMENT}")
        mine = [
            comment for comment in self.comments(number)
            if tag in (comment.get("body") or "") and (comment.get("user") or {}).get("login") == BOT_LOGIN
        ]
        if mine:
            self._request("PATCH", f"{self.api_url}/repos/{self.repository}/issues/comments/{mine[-1]['id']}",
                          {"body": text})
            return "updated"
        self._request("POST", f"{self.api_url}/repos/{self.repository}/issues/{number}/comments", {"body": text})
        return "created"


def write_step_summary(text: str, environ: Mapping[str, str] | None = None) -> bool:
    """Append to the job summary when running in GitHub Actions; False elsewhere."""
    path = (environ if environ is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with Path(path).open("a", encoding="utf-8") as summary:
        summary.write(text[:MAX_SUMMARY] + "\n")
    return True


def publish(subject: str, body: str, environ: Mapping[str, str] | None = None) -> str:
    """Job summary always; the pull request's comment when this run may write one. Says what it did.

    Reads what a `pull_request` workflow run has: GITHUB_TOKEN (passed in the step's env), GITHUB_API_URL,
    GITHUB_REPOSITORY, PR_NUMBER and PR_HEAD_REPOSITORY (from the event, passed by the workflow).
    """
    env = environ if environ is not None else os.environ
    write_step_summary(body, env)
    number, head = env.get("PR_NUMBER", ""), env.get("PR_HEAD_REPOSITORY", "")
    if not number.isdigit():
        return "job summary only: not a pull request"
    if not head:  # unknown whether it is a fork: no comment
        return "job summary only: PR_HEAD_REPOSITORY is empty: the pull request's head repository is unknown " \
            "(a deleted fork?)"
    if head != env.get("GITHUB_REPOSITORY"):
        return f"job summary only: {head} is a fork, whose token cannot comment"
    if not env.get("GITHUB_TOKEN"):
        return "job summary only: no GITHUB_TOKEN"
    github = GitHub(env.get("GITHUB_API_URL", "https://api.github.com"), env["GITHUB_TOKEN"], env["GITHUB_REPOSITORY"])
    try:
        return f"comment {github.upsert(int(number), subject, body)}"
    except GitHubError as error:
        if error.status in (401, 403, 404):
            return f"job summary only: {error}"
        raise
