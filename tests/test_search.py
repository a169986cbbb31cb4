"""Search over the tree of attempts: the strategies' picks, the planner's prompt and reply, and a
tree search run by the offline agents end to end, resumed with no instruction tried twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from pragma_core import load_task
from pragma_core.agents.extraction import extract_code
from pragma_core.agents.prompts import coder_messages, debugger_messages, planner_messages
from pragma_core.agents.replies import PlanParseError, parse_plan
from pragma_core.cli import main
from pragma_core.errors import PragmaError
from pragma_core.loop.optimizer import optimize
from pragma_core.loop.run_directory import RunDirectory
from pragma_core.loop.search import SearchTree, strategy_named
from pragma_core.loop.settings import OptimizeSettings
from pragma_core.offline.coder import backend_knobs, generate_module
from pragma_core.offline.knobs import starting
from pragma_core.offline.modules import read_marker
from pragma_core.offline.provider import complete as offline
from pragma_core.records import (
    AgentRole,
    Attempt,
    Candidate,
    ChatMessage,
    CompletionRequest,
    Guidance,
    Speedup,
    Verdict,
)
from pragma_core.verifier import VerifySettings

from .conftest import EXAMPLES, REPO


def node(number: int, speedup: float | None, *, parent: int | None = None, instruction: str | None = None) -> Attempt:
    """An attempt: correct at ``speedup`` (None: wrong output)."""
    if speedup is None:
        verdict = Verdict(status="wrong_output", message="wrong output")
    else:
        verdict = Verdict(
            status="correct", message="ok", speedup=Speedup(value=speedup, low=speedup * 0.95, high=speedup * 1.05)
        )
    source = f"# attempt {number}\nclass ModelNew: pass\n"
    return Attempt(
        number=number,
        parent=parent,
        instruction=instruction,
        candidate=Candidate(source=source, backend="cpu-cpp", attempt=number),
        verdict=verdict,
        guidance=Guidance(analysis=f"attempt {number} is memory bound", actions=("tile the loop",)),
    )


def test_linear_changes_the_last_attempt_whatever_it_was():
    tree = SearchTree(attempts=(node(1, 2.0), node(2, None, parent=1)))
    assert [a.number for a in strategy_named("linear").parents(tree, 3, random.Random(0))] == [2]


def test_beam_expands_the_fastest_open_nodes_once_each():
    attempts = (node(1, 1.0), node(2, 3.0, parent=1, instruction="a"), node(3, 2.0, parent=1, instruction="b"))
    tree = SearchTree(attempts=attempts, plans={1: ("a", "b")}, best=attempts[1])
    # attempt 1's plan is used up: it is closed, and the beam holds the two others, fastest first.
    assert [a.number for a in strategy_named("beam").parents(tree, 2, random.Random(0))] == [2, 3]
    assert [a.number for a in strategy_named("beam").parents(tree, 3, random.Random(0))] == [2, 3, 2]


def test_tree_mostly_expands_the_best_and_explores_less_as_the_best_goes_stale():
    attempts = [node(1, 1.0), node(2, 3.0, parent=1, instruction="a"), node(3, 2.8, parent=1, instruction="b")]
    tree = SearchTree(attempts=attempts, best=attempts[1])
    picks = [strategy_named("tree").parents(tree, 2, random.Random(seed)) for seed in range(400)]
    assert all(len(set(map(id, pick))) == 1 and len(pick) == 2 for pick in picks)  # branching children of one node
    fresh = sum(pick[0].number != 2 for pick in picks) / len(picks)
    assert 0.15 < fresh < 0.45  # epsilon 0.3 while the best is new (one attempt ago)
    stale = [*attempts, *(node(n, 0.5, parent=2, instruction=f"x{n}") for n in range(4, 12))]
    tree = SearchTree(attempts=stale, best=attempts[1])
    explored = sum(strategy_named("tree").parents(tree, 2, random.Random(s))[0].number != 2 for s in range(400))
    assert explored / 400 < fresh / 2


def test_tree_explores_only_nodes_whose_interval_reaches_90_percent_of_the_fastest():
    # 2.6x with its interval up to 2.73x could be within 90% of the fastest 3.0x; 2.4x (up to 2.52x),
    # the slow root and the children of the best cannot.
    attempts = [
        node(1, 0.5),
        node(2, 3.0, parent=1, instruction="a"),
        node(3, 2.6, parent=1, instruction="b"),
        node(4, 2.4, parent=1, instruction="c"),
        node(5, 1.0, parent=2, instruction="d"),
    ]
    tree = SearchTree(attempts=attempts, best=attempts[1])
    picked = {strategy_named("tree").parents(tree, 2, random.Random(seed))[0].number for seed in range(400)}
    assert picked == {2, 3}
    # Nothing but slow branches beside the best: every round expands the best.
    slow = SearchTree(attempts=[attempts[0], attempts[1], attempts[4]], best=attempts[1])
    assert {strategy_named("tree").parents(slow, 2, random.Random(seed))[0].number for seed in range(400)} == {2}
    # The best's plan used up, only far slower branches are open: the tree search ends there, as the
    # linear loop ends when no move from its best is left; beam still expands them.
    used_up = SearchTree(attempts=[attempts[0], attempts[1], attempts[4]], plans={2: ("d",)}, best=attempts[1])
    assert strategy_named("tree").parents(used_up, 2, random.Random(0)) == []
    assert [a.number for a in strategy_named("beam").parents(used_up, 2, random.Random(0))] == [5, 1]


def test_with_no_correct_attempt_tree_and_beam_repair_the_last_and_stop_when_all_plans_are_tried():
    failing = SearchTree(attempts=(node(1, None), node(2, None, parent=1)))
    for name in ("tree", "beam"):
        assert [a.number for a in strategy_named(name).parents(failing, 2, random.Random(0))] == [2]
    done = SearchTree(attempts=(node(1, 1.0), node(2, 0.9, parent=1, instruction="a")), plans={1: ("a",), 2: ()})
    assert strategy_named("tree").parents(done, 2, random.Random(0)) == []
    with pytest.raises(PragmaError, match="--search depth: not a search strategy; choose one of linear, tree, beam"):
        strategy_named("depth")


def test_the_planner_sees_its_node_the_leaders_and_what_was_tried_not_the_history():
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py")
    attempts = [node(1, 1.0), node(2, 3.0, parent=1, instruction="in the inner loop: use AVX2"), node(3, None)]
    system, user = planner_messages(task, attempts[0], tree=attempts)
    assert "Planner" in system.content and "Anchor every instruction" in system.content
    assert "# attempt 1" in user.content and "# attempt 2" not in user.content  # only the node's code
    assert "attempt 1 is memory bound" in user.content  # the Conductor's analysis of it
    assert "Already tried from it" in user.content and "use AVX2" in user.content
    assert "| 2 | 1 | 3.00x" in user.content  # the leaders, one row each


def test_the_coder_applies_one_instruction_to_its_parent_not_the_conductors_whole_advice():
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py")
    parent, best = node(2, 1.5, parent=1), node(3, 2.0, parent=1)
    _, user = coder_messages(task, "guide", guidance=parent.guidance, best=best, last=parent, instruction="unroll i")
    assert "## The change to make" in user.content and "unroll i" in user.content
    assert "The attempt to change: attempt 2" in user.content and "# attempt 2" in user.content
    assert "attempt 2 is memory bound" in user.content and "tile the loop" not in user.content
    _, linear = coder_messages(task, "guide", guidance=parent.guidance, best=best, last=parent)
    assert "Last attempt: attempt 2" in linear.content and "1. tile the loop" in linear.content


def test_each_failed_planned_child_is_debugged_once_from_its_evidence_alone():
    failed = node(3, None, parent=2, instruction="set fast_math=true")
    attempts = (node(1, 1.0), node(2, 2.0, parent=1, instruction="a"), failed, node(4, None))
    assert [a.number for a in SearchTree(attempts=attempts).to_debug()] == [3]  # 4 applied no instruction
    fixed = Attempt(number=5, parent=3, writer="debugger", verdict=Verdict(status="wrong_output", message="x"))
    assert SearchTree(attempts=(*attempts, fixed)).to_debug() == []  # 3 has its fix; a failed fix is not fixed
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py")
    system, user = debugger_messages(task, "the guide", failed)
    assert "Debugger" in system.content and "wrong_output" in user.content and "set fast_math=true" in user.content
    assert (
        "# attempt 3" in user.content and "# attempt 2" not in user.content and "Earlier attempts" not in user.content
    )


def test_the_offline_debugger_sets_back_the_riskiest_knob_of_the_failing_move():
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", sizes={"batch_size": 16})
    knobs = starting(backend_knobs(task, "cpu-cpp"))
    parent_knobs = {**knobs, "fast_math": False, "unroll": 1}
    moved = {**parent_knobs, "fast_math": True, "unroll": 2}

    def written(number: int, chosen: dict, **fields) -> Attempt:
        source = generate_module(task, "cpu-cpp", chosen)
        return Attempt(number=number, candidate=Candidate(source=source, backend="cpu-cpp"), **fields)

    parent = written(1, parent_knobs, verdict=Verdict(status="correct", message="ok"))
    failed = written(
        2,
        moved,
        parent=1,
        instruction="set fast_math=true, set unroll=2",
        verdict=Verdict(status="wrong_output", message="off by 1e-3"),
    )

    def fix(failing: Attempt) -> dict:
        request = CompletionRequest(
            role=AgentRole.DEBUGGER, messages=(ChatMessage(role="user", content="fix"),), task=task,
            backend="cpu-cpp", parent=failing, history=(parent, failing),
        )  # fmt: skip
        reply = offline(request).text
        return read_marker(extract_code(reply))["knobs"]

    assert fix(failed) == {**moved, "fast_math": False}  # fast math blamed, the unroll kept
    alone = written(2, {**parent_knobs, "unroll": 2}, parent=1, instruction="set unroll=2", verdict=failed.verdict)
    assert fix(alone) == parent_knobs  # the only change is the fault: the parent's version again


def test_the_offline_planner_puts_first_what_helped_elsewhere_in_the_tree_and_last_what_hurt():
    task = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", sizes={"batch_size": 16})
    root = {**starting(backend_knobs(task, "cpu-cpp")), "fast_math": False, "unroll": 1, "vector_width": 256}

    def written(number: int, changes: dict, speedup: float | None, parent: int | None = None) -> Attempt:
        source = generate_module(task, "cpu-cpp", {**root, **changes})
        made = node(number, speedup, parent=parent, instruction=None if parent is None else str(changes))
        return attrs.evolve(made, candidate=Candidate(source=source, backend="cpu-cpp", attempt=number))

    tree = [
        written(1, {}, 1.0),
        written(2, {"fast_math": True}, 1.5, parent=1),
        written(3, {"unroll": 2}, 1.2, parent=1),
        written(4, {"vector_width": 512}, 0.8, parent=1),
    ]

    def planned(parent: Attempt, history: list[Attempt]) -> list[str]:
        request = CompletionRequest(
            role=AgentRole.PLANNER, messages=(ChatMessage(role="user", content="plan"),), task=task,
            backend="cpu-cpp", parent=parent, history=tuple(history),
        )  # fmt: skip
        return list(parse_plan(offline(request).text))

    first, *_, last = planned(tree[1], tree)
    assert "set unroll=2 (from attempt 2)" in first and "made attempt 3 20% faster than attempt 1" in first
    assert "set vector_width=512 (from attempt 2)" in last and "made attempt 4 20% slower than attempt 1" in last
    failed = [*tree[:3], written(4, {"vector_width": 512}, None, parent=1)]
    assert "failed when attempt 4 made it on attempt 1" in planned(tree[1], failed)[-1]
    alone = planned(tree[1], tree[:2])  # no sibling yet: the Conductor's evidence alone orders the plan
    assert not any("faster than attempt" in i or "slower than attempt" in i for i in alone)

    top = {"fast_math": True, "vector_width": 512, "unroll": 4}  # every knob at its end: only steps back
    ends = [written(5, top, 1.6, parent=2), written(6, {**top, "unroll": 2}, 1.5, parent=5)]
    (left,) = planned(ends[0], [*tree, *ends])
    assert "set vector_width=256 (from attempt 5)" in left and "one step back from 512" in left
    ends.append(written(7, {**top, "vector_width": 256}, 1.5, parent=5))
    assert planned(ends[0], [*tree, *ends]) == []  # nothing left from it: an empty plan, read as one


def test_a_plan_reply_is_read_whatever_its_shape():
    assert parse_plan('```json\n{"instructions": ["a", "b", "a"]}\n```') == ("a", "b")
    shaped = {"plan": [{"anchor": "loop i", "change": "unroll by 4", "why": "IPC 0.8"}]}
    assert parse_plan("Here you go:\n" + json.dumps(shaped)) == ("anchor: loop i; change: unroll by 4; why: IPC 0.8",)
    assert parse_plan('{"instructions": []}') == ()  # nothing left to try from this candidate: an answer
    with pytest.raises(PlanParseError, match="no list of instructions"):
        parse_plan('{"analysis": "memory bound"}')


def _tree_settings(runs, attempts: int) -> OptimizeSettings:
    return OptimizeSettings(
        search="tree",
        branching=2,
        max_attempts=attempts,
        patience=attempts,
        target_attainment=1e9,  # no stop at the roofline: every run uses its whole budget
        profile=False,
        runs_dir=runs,
        verify=VerifySettings(reps=10, threads=1),
    )


LEAKY_RELU = EXAMPLES / "level1" / "2_LeakyReLU.py"


KILLED_RUN_ATTEMPTS = 5
"""The root, the killed round (2 and 3) and one whole round after the resume (4 and 5, from a plan
asked for after it): a third round would only repeat what the second shows."""


def tree_run(runs: str) -> None:
    """The tree search the test below kills: run in a process of its own (``python -c``)."""
    optimize(load_task(LEAKY_RELU, sizes={"batch_size": 64}), _tree_settings(Path(runs), KILLED_RUN_ATTEMPTS))


def test_a_tree_search_killed_mid_round_resumes_without_losing_or_repeating(tmp_path, capsys):
    """SIGKILL while the second child of the first round is verified, then resume: the finished
    attempts are kept byte for byte, the plan is not asked for again, no instruction is applied
    twice to one parent, and the round's children were built ahead of their verifications."""
    runs = tmp_path / "runs"
    first = subprocess.Popen(
        [sys.executable, "-c", f"from tests.test_search import tree_run; tree_run({str(runs)!r})"],
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 600
    while not list(runs.glob("*/.attempt-03.partial")):
        assert first.poll() is None, f"the run ended early: {first.communicate()[1][-2000:]!r}"
        assert time.monotonic() < deadline, "attempt 3 never started"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    (root,) = runs.iterdir()
    run = RunDirectory(root)
    one, two = run.completed_attempts()
    assert one.parent is None and one.instruction is None
    assert two.parent == 1 and two.instruction == run.plans()[1].instructions[0]
    assert "pragma-recipe" in two.instruction and "(from attempt 1)" in two.instruction
    kept = {n: (root / f"attempt-0{n}" / "attempt.json").read_bytes() for n in (1, 2)}

    resumed = optimize(None, _tree_settings(runs, KILLED_RUN_ATTEMPTS), resume=root)
    attempts = resumed.attempts
    assert [a.number for a in attempts] == list(range(1, KILLED_RUN_ATTEMPTS + 1))
    assert {n: (root / f"attempt-0{n}" / "attempt.json").read_bytes() for n in (1, 2)} == kept
    assert not list(root.glob(".*partial"))
    pairs = [(a.parent, a.instruction) for a in attempts if a.instruction]
    assert len(pairs) == len(set(pairs))  # no instruction applied twice to the same parent
    versions = [json.dumps(read_marker(a.candidate.source)["knobs"], sort_keys=True) for a in attempts]
    assert len(versions) == len(set(versions))  # no version built twice, from any parent
    assert not any("did not parse" in plan.note for plan in run.plans().values())
    assert all(a.parent is not None and a.parent < a.number for a in attempts[1:])
    events = run.events()
    planned = [e["parent"] for e in events if e["event"] == "planned"]
    assert len(planned) == len(set(planned))  # a plan is asked for once per node, killed or not
    assert [e["event"] for e in events].count("resumed") == 1
    assert 2 in {e["attempt"] for e in events if e["event"] == "built_ahead"}
    assert resumed.best is not None and resumed.best.verdict.ok

    capsys.readouterr()
    main(["trace", str(root), "--tree"])  # returns when it succeeds (exits only on an error)
    shown = capsys.readouterr().out
    assert f"search tree of level1/2_LeakyReLU (tree): {KILLED_RUN_ATTEMPTS} attempts" in shown
    assert "#1 correct" in shown and "── #2 correct" in shown and "[best]" in shown
    assert all(f"── #{n} " in shown for n in range(3, KILLED_RUN_ATTEMPTS + 1))  # each attempt under its parent
    assert (root / "tree.png").read_bytes()[:4] == b"\x89PNG"


BREAKING_MODEL = '''
import os
from pragma_core import LLMProvider, hookimpl
from pragma_core.plugin_api.registry import get_registry

OFF_BY_ONE = """
_forward = ModelNew.forward


def _off_by_one(self, *args):
    return _forward(self, *args) + 1


ModelNew.forward = _off_by_one
"""


def _first_to_claim(path):
    """True for one caller only, whichever of the round's writer threads asks first."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def complete(request):
    reply = get_registry().llm_provider("offline").complete(request)
    if request.role.value == "coder" and request.instruction and _first_to_claim(os.environ["BREAK_ONCE"]):
        text = reply.text.rstrip().removesuffix("```").rstrip() + "\\n" + OFF_BY_ONE + "```\\n"
        return type(reply)(text=text, model=reply.model)
    return reply


@hookimpl
def pragma_register_llm_providers(register):
    offline = get_registry().llm_provider("offline")
    register(LLMProvider(name="breaking", complete=complete, prepare=offline.prepare, reads_messages=False))
'''


def test_a_child_that_fails_is_fixed_by_the_debugger_before_the_search_goes_on(tmp_path, plugin_site, monkeypatch):
    """A model whose first planned change adds one to the output (with a PyTorch operator, which the
    Verifier rejects): the next attempt is the debugger's fix of it, from its evidence alone, and
    the search then goes on from the plan."""
    plugin_site.add("breaking_model", BREAKING_MODEL, entry_point="breaking")
    monkeypatch.setenv("BREAK_ONCE", str(tmp_path / "broken"))
    task = load_task(EXAMPLES / "level1" / "2_LeakyReLU.py", sizes={"batch_size": 64})
    settings = attrs.evolve(_tree_settings(tmp_path / "runs", 5), provider="breaking")
    result = optimize(task, settings)
    one, second, third, fix, after = result.attempts
    # the round's two children are written at once: either may be the one that was broken
    broken, sibling = (second, third) if not second.verdict.ok else (third, second)
    assert broken.parent == 1 and broken.instruction and not broken.verdict.ok
    assert sibling.parent == 1 and sibling.verdict.ok
    assert fix.writer is AgentRole.DEBUGGER and fix.parent == broken.number and fix.verdict.ok, fix.verdict.message
    assert fix.instruction is None and after.writer is AgentRole.CODER and after.instruction
    run = RunDirectory(tmp_path / "runs" / result.run_id)
    prompt = (run.attempt_folder(fix.number) / "debugger_prompt.txt").read_text()
    assert "_off_by_one" in prompt and f"status: {broken.verdict.status.value}" in prompt  # the evidence
    assert "Earlier attempts" not in prompt and "Best candidate" not in prompt  # and nothing else


WATCHED_MODEL = """
import json, os, threading, time
from pragma_core import LLMProvider, hookimpl
from pragma_core.plugin_api.registry import get_registry


def complete(request):
    started = time.monotonic()
    if request.instruction:
        time.sleep(1.0)  # as a hosted model keeps the Coder waiting
    reply = get_registry().llm_provider("offline").complete(request)
    with open(os.environ["WATCHED_CALLS"], "a") as log:
        log.write(json.dumps({"role": request.role.value, "instruction": request.instruction,
                              "start": started, "end": time.monotonic()}) + "\\n")
    return reply


@hookimpl
def pragma_register_llm_providers(register):
    offline = get_registry().llm_provider("offline")
    register(LLMProvider(name="watched", complete=complete, prepare=offline.prepare, reads_messages=True))
"""


def test_the_children_of_a_round_are_written_at_once_and_tokens_are_counted_per_role(
    tmp_path, plugin_site, monkeypatch
):
    from pragma_core.loop.run_summary import run_summary

    plugin_site.add("watched_model", WATCHED_MODEL, entry_point="watched")
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("WATCHED_CALLS", str(calls))
    task = load_task(EXAMPLES / "level1" / "2_LeakyReLU.py", sizes={"batch_size": 64})
    result = optimize(task, attrs.evolve(_tree_settings(tmp_path / "runs", 3), provider="watched"))
    assert [a.parent for a in result.attempts] == [None, 1, 1]
    coder = [json.loads(line) for line in calls.read_text().splitlines()]
    first, second = [call for call in coder if call["role"] == "coder" and call["instruction"]]
    assert second["start"] < first["end"] and first["start"] < second["end"]  # the two replies overlapped
    summary = run_summary(result, run_dir=tmp_path / "runs" / result.run_id, model=None, provider="watched")
    assert set(summary["tokens_by_role"]) == {"coder", "conductor", "planner"}
