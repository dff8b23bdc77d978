"""Refresh the scrubber's copy of gitleaks' default rule set from a newer gitleaks.

The scrubber (``src/feedback_insights/privacy/_gitleaks.py``) applies gitleaks' default
configuration, shipped in ``src/feedback_insights/privacy/gitleaks/`` with gitleaks' MIT licence
and a README naming where it came from. To move to a newer gitleaks:

1. take ``config/gitleaks.toml`` and ``LICENSE`` from the gitleaks commit you want
   (github.com/gitleaks/gitleaks), e.g. into ``/tmp/gitleaks/``;
2. run, from the repository root::

       .venv/bin/python scripts/refresh_gitleaks.py /tmp/gitleaks/gitleaks.toml \\
           --license /tmp/gitleaks/LICENSE --commit <the 40-hex commit> --date <its date>

3. read the report: how many rules apply, every rule left out and why (RE2 cannot compile
   its regex, a path-only rule, a gitleaks feature this engine does not implement), rules
   applied differently (path scopes), and the rules for which no sample could be generated or
   whose prefilter hint missed one of its samples (a hand-written hint in
   ``_gitleaks._SHARPER_HINTS`` that no longer fits its rule: fix it before committing);
4. run ``tests/test_secret_rules.py`` and ``benchmarks/scrub.py`` (per-family recall).

The TOML is copied byte for byte; the exit status is 1 if a hint misses a sample. ``--into``
writes elsewhere (the tests use it); by default the package's copy is replaced.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import re2

from feedback_insights.privacy._gitleaks import RuleSet, parse_rules
from feedback_insights.privacy.samples import rule_samples

PACKAGE_COPY = Path(__file__).resolve().parents[1] / "src" / "feedback_insights" / "privacy" / "gitleaks"

README = """# gitleaks' default rule set, as shipped in this package

- `gitleaks.toml`: gitleaks' default configuration, copied unchanged from the public repository
  `gitleaks/gitleaks`, file `config/gitleaks.toml`, commit
  {commit}{date}: {total} rules and the global allow-list.
- `LICENSE`: gitleaks' MIT licence, from the same commit. It must travel with every copy of
  `gitleaks.toml`, this package's wheel included.
- How the scrubber uses it (`../_gitleaks.py`): every rule whose regex RE2 compiles is applied to
  feedback text as gitleaks applies it to a file — its keywords as the prefilter, its regex, its
  secret group, its entropy threshold, the global allow-list and its own allow-lists (regexes,
  stop-words; their `regexTarget` and `condition`). Feedback has no file path, so path
  conditions never allow a find and a rule's `path` scope is not required; a rule that is only a
  path (`pkcs12-file`) is left out.
- Refresh from a newer copy with `scripts/refresh_gitleaks.py PATH/TO/gitleaks.toml
  [--license PATH/TO/LICENSE] [--commit SHA] [--date YYYY-MM-DD]`: it copies both files here,
  rewrites the source line above and prints which rules compile, which are left out and why.
"""


def hint_misses(rules: RuleSet, per_rule: int) -> tuple[list[str], list[str]]:
    """Rules without samples, and rules whose prefilter patterns miss one of their samples."""
    gate = re2.compile(rules.gate) if rules.gate else None
    no_sample, missed = [], []
    for rule, samples in rule_samples(rules, per_rule):
        if not samples:
            no_sample.append(rule.id)
        hint = re2.compile(rule.hint) if rule.hint else None
        for sample in samples:
            if hint is not None and not hint.search(sample.text):
                missed.append(f"{rule.id}: hint {rule.hint!r} misses {sample.text!r}")
                break
            if rule.names is not None and gate is not None and not gate.search(sample.text):
                missed.append(f"{rule.id}: the assignment gate misses {sample.text!r}")
                break
    return no_sample, missed


def report(rules: RuleSet, per_rule: int) -> int:
    print(f"{len(rules.rules)} of {rules.total} rules apply; {len(rules.left_out)} left out:")
    for rule_id, why in rules.left_out:
        print(f"  - {rule_id}: {why}")
    for rule_id, how in rules.notes:
        print(f"  ~ {rule_id}: {how}")
    families = rules.families
    print(f"{len(families)} families (placeholder kinds): {', '.join(sorted({r.kind for r in rules.rules}))}")
    no_sample, missed = hint_misses(rules, per_rule)
    if no_sample:
        print(f"no sample could be generated for {len(no_sample)} rules: {', '.join(no_sample)}")
    for line in missed:
        print(f"  ! {line}")
    print("every hint matches its rule's samples" if not missed else f"{len(missed)} hints miss samples: fix them")
    return 1 if missed else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("toml", type=Path, help="gitleaks' config/gitleaks.toml")
    parser.add_argument("--license", type=Path, help="gitleaks' LICENSE from the same commit")
    parser.add_argument("--commit", default="(commit not given)", help="the gitleaks commit the files are from")
    parser.add_argument("--date", help="that commit's date (YYYY-MM-DD)")
    parser.add_argument("--into", type=Path, default=PACKAGE_COPY, help="where the copy goes (default: the package)")
    parser.add_argument("--samples", type=int, default=5, help="samples generated per rule for the checks")
    args = parser.parse_args(argv)
    text = args.toml.read_text(encoding="utf-8")
    rules = parse_rules(text, compile_all=True)  # raises on a file that is no gitleaks TOML
    args.into.mkdir(parents=True, exist_ok=True)
    target = args.into / "gitleaks.toml"
    target.unlink(missing_ok=True)  # the vendored copies are read-only
    shutil.copyfile(args.toml, target)
    if args.license is not None:
        (args.into / "LICENSE").unlink(missing_ok=True)
        shutil.copyfile(args.license, args.into / "LICENSE")
    elif not (args.into / "LICENSE").is_file():
        print("no LICENSE given and none in place: gitleaks' licence must ship with its rules", file=sys.stderr)
        return 2
    date = f" ({args.date})" if args.date else ""
    (args.into / "README.md").write_text(README.format(commit=args.commit, date=date, total=rules.total), encoding="utf-8")
    print(f"copied {args.toml} to {target}")
    return report(rules, args.samples)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
