#!/usr/bin/env python3
"""Expand-then-contract, checked: no migration added since the previous release drops or
renames what that release reads.

During a rolling upgrade the previous release (its commit named in PREVIOUS_RELEASE) runs on
the schema this release's migrations leave, and a rollback runs it there again. So the `up`
of a migration it does not have may add, never take away: a dropped or renamed table or
column (a type changed in place, too) must be one the previous release no longer reads.

A migration that contracts names what it drops on a line `// contract: <name> [<name>…]`
inside its `up`; this check fails when
  - an `up` drops, renames or modifies a table or column without such a line, or
  - a name it lists appears as a word in the previous release's server sources (what that
    release reads at run time).
Dropping an index changes no reader and is allowed.

  migration-contract.py              check the migrations added since PREVIOUS_RELEASE
  migration-contract.py --self-test  plant contracting migrations in memory: must be caught
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS = "migrations/src"

# Statements that take away what a reader may use (sea-query calls and raw SQL).
CONTRACTING = re.compile(
    r"drop_column|drop_table|Table::drop|rename_column|rename_table|Table::rename|modify_column"
    r"|\bDROP\s+(?:TABLE|COLUMN)\b|\bRENAME\s+(?:TO|COLUMN)\b|\bALTER\s+COLUMN\b|\bMODIFY\s+COLUMN\b",
    re.IGNORECASE,
)
MARKER = re.compile(r"//\s*contract:\s*(.+)")


def previous_commit():
    for line in (ROOT / "PREVIOUS_RELEASE").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.split()[0]
    sys.exit("migration-contract: PREVIOUS_RELEASE names no commit")


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def up_body(source):
    """The text of a migration's `up` function (up to its `down`, or the end)."""
    start = source.find("fn up(")
    if start < 0:
        return ""
    end = source.find("fn down(", start)
    return source[start : end if end >= 0 else len(source)]


def problems(name, source, read_by_previous):
    """What is wrong with migration `name`'s `up`: a list of messages (empty: fine).
    `read_by_previous(word)` tells whether the previous release's sources use `word`."""
    body = up_body(source)
    ops = [m.group(0) for m in CONTRACTING.finditer(body)]
    if not ops:
        return []
    named = [n for m in MARKER.finditer(body) for n in m.group(1).split()]
    if not named:
        return [f"{name}: its up() contracts the schema ({', '.join(sorted(set(ops)))}) without naming what it "
                "drops on a `// contract: <name>` line"]
    return [f"{name}: drops or renames `{n}`, which the previous release still reads"
            for n in named if read_by_previous(n)]


def check():
    commit = previous_commit()
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        sys.exit(f"migration-contract: commit {commit} (PREVIOUS_RELEASE) is not in this clone's history")
    before = set(git("ls-tree", "--name-only", f"{commit}:{MIGRATIONS}").stdout.split())
    added = sorted(p for p in (ROOT / MIGRATIONS).glob("m*.rs") if p.name not in before)

    def read_by_previous(word):
        return git("grep", "-q", "-w", "-e", word, commit, "--", "server/src").returncode == 0

    found = [msg for path in added for msg in problems(path.name, path.read_text(), read_by_previous)]
    for msg in found:
        print(f"migration-contract: {msg}", file=sys.stderr)
    if found:
        sys.exit(1)
    print(f"migration-contract: {len(added)} migration(s) since {commit[:12]} only expand the schema "
          "or drop what it no longer reads")


def self_test():
    reads = {"product_daily_metrics", "views"}.__contains__
    cases = [
        ("an unnamed drop", "fn up(){ Table::alter().drop_column(Metrics::Views) } fn down(){}", True),
        ("a raw rename", "fn up(){ db.execute_unprepared(\"ALTER TABLE t RENAME TO u\") } fn down(){}", True),
        ("a named drop the previous release reads",
         "fn up(){ // contract: views\n Table::alter().drop_column(Metrics::Views) } fn down(){}", True),
        ("a named drop nothing reads",
         "fn up(){ // contract: legacy_scores\n Table::drop().table(Legacy::Table) } fn down(){}", False),
        ("a drop in down() only", "fn up(){ Table::create() } fn down(){ Table::drop().table(T::Table) }", False),
        ("an index dropped", "fn up(){ manager.drop_index(Index::drop().name(\"i\")) } fn down(){}", False),
    ]
    failed = [what for what, source, caught in cases if bool(problems("m_test.rs", source, reads)) != caught]
    if failed:
        sys.exit(f"migration-contract --self-test: wrong verdict for {', '.join(failed)}")
    print(f"migration-contract --self-test: {len(cases)} planted migrations judged right")


if __name__ == "__main__":
    self_test() if sys.argv[1:] == ["--self-test"] else check()
