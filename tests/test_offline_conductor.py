"""The rule-based Conductor's choices, on profiles recorded from this machine's cachegrind and perf
(tests/data/profiles: `pragma profile --json` of generated GELU modules and of a naive matmul)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from pragma_core import (
    Attempt,
    Candidate,
    ChatMessage,
    CompletionRequest,
    Profile,
    Speedup,
    Verdict,
    from_dict,
    load_task,
)
from pragma_core.offline.conductor import LADDER, Evidence, advise, rank_moves, read_evidence
from pragma_core.offline.knobs import starting
from pragma_core.offline.recipe import KNOB_MEANINGS, Knob
from pragma_core.offline.recipes import RECIPES
from pragma_core.offline.recipes.attention import AttentionRecipe
from pragma_core.offline.recipes.conv_transposed import ConvTransposedRecipe
from pragma_core.offline.recipes.convolution import ConvolutionRecipe
from pragma_core.offline.recipes.elementwise import ElementwiseRecipe

from .conftest import EXAMPLES

PROFILES = Path(__file__).parent / "data" / "profiles"
GELU = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", {"batch_size": 64})  # the size profiled
MATMUL = load_task(EXAMPLES / "level1" / "10_Matmul.py", {"M": 256, "K": 256, "N": 256})
ELEMENTWISE = ElementwiseRecipe().knobs
MATMUL_KNOBS = {
    "parallel": Knob(default=False, values=(False, True)),
    "simd": Knob(default=False, values=(False, True)),
    "accumulators": Knob(default=1, values=(1, 4, 8)),
    "block": Knob(default=0, values=(0, 64)),
}


def recorded(name: str) -> Profile:
    return from_dict(Profile, json.loads((PROFILES / name).read_text()))


def test_scalar_gelu_spends_its_instructions_in_library_calls():
    plain = read_evidence([recorded("gelu_knobs0.valgrind.json")], GELU)
    tuned = read_evidence([recorded("gelu_knobs3.valgrind.json")], GELU)
    assert plain.outside_instructions > 50 and plain.kernel_instructions > 10  # ~102 and 15 per element
    assert tuned.outside_instructions < 10 and tuned.kernel_instructions < plain.kernel_instructions / 4
    assert plain.mispredict_rate < 0.5


def test_counts_of_a_reduced_size_are_read_per_element_of_that_size():
    at_64_rows = recorded("gelu_knobs0.valgrind.json")
    full = load_task(EXAMPLES / "level1" / "1_GELUTanh.py")  # 1024 rows; the profile says it ran 64
    reduced = attrs.evolve(at_64_rows, sizes={"batch_size": 64})
    assert read_evidence([reduced], full) == read_evidence([at_64_rows], GELU)
    assert read_evidence([at_64_rows], full).kernel_instructions < read_evidence([reduced], full).kernel_instructions


def test_library_calls_ask_for_fast_math_and_vectorization_together():
    base = {"parallel": True, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
    evidence = read_evidence([recorded("gelu_knobs0.valgrind.json")], GELU)
    (first, reason), *_ = rank_moves(ELEMENTWISE, base, [base], evidence, attainment=0.3, profiled=True)
    assert first == {"fast_math": True, "simd": True} and "library calls" in reason


def test_without_a_profile_moves_follow_the_fixed_order():
    base = {"parallel": True, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
    moves = rank_moves(ELEMENTWISE, base, [base], Evidence(), attainment=0.3, profiled=False)
    assert [changes for changes, _ in moves] == [
        {"simd": True},
        {"fast_math": True},
        {"unroll": 2},
        {"vector_width": 512},
    ]


def test_perf_without_hardware_counters_gives_no_evidence_and_the_fixed_order():
    evidence = read_evidence([recorded("gelu_knobs0.perf.json")], GELU)
    assert evidence == Evidence()
    base = {"parallel": False, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
    profiled = rank_moves(ELEMENTWISE, base, [base], evidence, attainment=0.05, profiled=True)
    assert [c for c, _ in profiled] == [
        c for c, _ in rank_moves(ELEMENTWISE, base, [base], evidence, attainment=0.05, profiled=False)
    ]


def test_parallelizing_comes_first_while_far_from_the_roofline():
    base = {"parallel": False, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
    evidence = read_evidence([recorded("gelu_knobs0.valgrind.json")], GELU)
    (first, reason), *_ = rank_moves(ELEMENTWISE, base, [base], evidence, attainment=0.01, profiled=True)
    assert first == {"parallel": True} and "1% of the roofline" in reason


def test_many_d1_misses_ask_for_blocking_first_and_few_put_it_last():
    base = {"parallel": True, "simd": False, "accumulators": 1, "block": 0}
    naive = read_evidence([recorded("matmul_naive.valgrind.json")], MATMUL)
    assert naive.d1_miss_rate > 40
    (first, reason), *_ = rank_moves(MATMUL_KNOBS, base, [base], naive, attainment=0.1, profiled=True)
    assert first == {"block": 64} and "D1 miss rate" in reason
    few = Evidence(d1_miss_rate=0.3, kernel_instructions=2.0)
    assert rank_moves(MATMUL_KNOBS, base, [base], few, attainment=0.1, profiled=True)[-1][0] == {"block": 64}


def test_a_tile_sized_for_l2_is_not_reordered_by_d1_misses():
    """A convolution's work item (its input slab, its panel of patches) is sized for L2, which D1
    could never hold: a D1 miss rate over 5% does not make a smaller tile the first move (on a
    2-core AVX2 EPYC it lost 15% on 62_conv and bought nothing on 55 and 80)."""
    for recipe in (ConvolutionRecipe(), ConvTransposedRecipe()):
        knobs = recipe.knobs
        base = starting(knobs)
        missing = Evidence(d1_miss_rate=12.0, kernel_instructions=0.5)
        profiled = [changes for changes, _ in rank_moves(knobs, base, [base], missing, attainment=0.3, profiled=True)]
        blind = [changes for changes, _ in rank_moves(knobs, base, [base], Evidence(), attainment=0.3, profiled=False)]
        smaller, larger = (
            {"block": knobs["block"].before(base["block"])},
            {"block": knobs["block"].after(base["block"])},
        )
        assert profiled.index(larger) < profiled.index(smaller) and blind.index(larger) < blind.index(smaller)
    untiled = {**starting(ConvTransposedRecipe.knobs), "block": 0}  # a loop that does not tile yet still tiles first
    (first, reason), *_ = rank_moves(
        ConvTransposedRecipe.knobs, untiled, [untiled], Evidence(d1_miss_rate=12.0), attainment=0.3, profiled=True
    )
    assert first == {"block": 64} and "D1 miss rate 12.0%" in reason


@pytest.mark.parametrize("recipe", [AttentionRecipe()], ids=lambda r: r.family)
def test_a_tiled_loop_that_misses_d1_steps_to_a_smaller_tile_first_and_only_with_a_profile(recipe):
    knobs = recipe.knobs
    base = starting(knobs)
    missing = Evidence(d1_miss_rate=12.0, kernel_instructions=0.5)
    moves = rank_moves(knobs, base, [base], missing, attainment=0.3, profiled=True)
    order = [changes for changes, _ in moves]
    blind = [changes for changes, _ in rank_moves(knobs, base, [base], Evidence(), attainment=0.3, profiled=False)]
    (first, reason), *_ = moves
    (tile, value), *_ = first.items()
    assert value == knobs[tile].before(base[tile]) and "D1 miss rate 12.0%" in reason and "smaller tile" in reason
    for tile in {"block", "key_tile"} & set(knobs):
        smaller, larger = {tile: knobs[tile].before(base[tile])}, {tile: knobs[tile].after(base[tile])}
        assert order.index(smaller) < order.index(larger)
        # Without a profile the same base moves forward first, in the fixed order; step-backs come last.
        assert blind.index(larger) < blind.index(smaller)


def test_a_tried_setting_is_never_proposed_again():
    base = {"parallel": True, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
    tried = [base, {**base, "simd": True}]
    moves = rank_moves(ELEMENTWISE, base, tried, Evidence(), attainment=0.3, profiled=False)
    assert {"simd": True} not in [c for c, _ in moves]
    tried += [{**base, "fast_math": True}, {**base, "vector_width": 512}, {**base, "unroll": 2}]
    assert rank_moves(ELEMENTWISE, base, tried, Evidence(), attainment=0.3, profiled=False) == []


def test_a_numeric_knob_at_its_start_may_step_back_after_the_forward_moves_and_a_switch_never_does():
    base = {"parallel": True, "simd": True, "accumulators": 4, "block": 64}  # block at its last value
    moves = [
        changes for changes, _ in rank_moves(MATMUL_KNOBS, base, [base], Evidence(), attainment=0.3, profiled=False)
    ]
    assert moves == [{"accumulators": 8}, {"accumulators": 1}, {"block": 0}]
    tried = [base, {**base, "block": 0}]
    assert {"block": 0} not in [
        c for c, _ in rank_moves(MATMUL_KNOBS, base, tried, Evidence(), attainment=0.3, profiled=False)
    ]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda recipe: recipe.family)
def test_every_knob_of_every_recipe_is_one_the_conductor_can_move_from_its_start(recipe):
    """A knob the Conductor's ladder does not name would stay at its start for good: the loop could
    never question a starting choice, such as a transposed convolution's layout (a switch started
    on, like ``parallel``, is the one kind never turned off)."""
    base = starting(recipe.knobs)
    for name, knob in recipe.knobs.items():
        assert name in LADDER and name in KNOB_MEANINGS, name
        moved = [
            changes for changes, _ in rank_moves(recipe.knobs, base, [base], Evidence(), attainment=0.9, profiled=False)
        ]
        if len(knob.values) > 1 and knob.starting is not True:
            assert any(name in changes for changes in moved), (name, moved)


@pytest.mark.parametrize("name", ["gelu_knobs0.valgrind.json", "matmul_naive.valgrind.json"])
def test_recorded_profiles_are_real_cachegrind_output(name):
    profile = recorded(name)
    assert profile.profiler == "valgrind" and any("cachegrind" in note for note in profile.notes)


def _gelu_attempt(number: int, knobs: dict, speedup: tuple[float, float, float]) -> Attempt:
    from pragma_core.offline.coder import recognized
    from pragma_core.offline.recipe import GenerationContext

    recipe, match, graph = recognized(GELU)
    source = recipe.generate(match, knobs, GenerationContext(graph=graph, task_source=GELU.source, task_key=GELU.key))
    value, low, high = speedup
    verdict = Verdict(status="correct", message="correct", speedup=Speedup(value=value, low=low, high=high))
    return Attempt(
        number=number, candidate=Candidate(source=source, backend="cpu-cpp", attempt=number), verdict=verdict
    )


@pytest.mark.parametrize(
    ("current_speedup", "base"),
    [((1.8, 0.8, 2.5), 2), ((1.1, 0.8, 1.5), 1), ((3.0, 2.0, 4.0), 2)],
    ids=["promising", "within-noise", "new-best"],
)
def test_the_next_move_builds_on_the_best_or_on_a_promising_candidate(current_speedup, base):
    plain = {"parallel": False, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
    first = _gelu_attempt(1, plain, (1.0, 0.9, 1.1))
    second = _gelu_attempt(2, {**plain, "parallel": True}, current_speedup)
    request = CompletionRequest(
        role="conductor",
        messages=(ChatMessage(role="user", content="advise"),),
        task=GELU,
        candidate=second.candidate,
        verdict=second.verdict,
        best=first,
        history=(first,),
    )
    reply = json.loads(advise(request).split("```json")[1].split("```")[0])
    assert reply["actions"][0].split("(from attempt ")[1].startswith(f"{base})")
    assert reply["new_best"] is (current_speedup[1] > 1.1)


def test_an_unchanged_move_is_read_as_a_knob_that_did_nothing_and_another_moves_next():
    plain = {"parallel": True, "simd": False, "fast_math": False, "vector_width": 256, "unroll": 1}
    first = _gelu_attempt(1, plain, (2.0, 1.9, 2.1))
    first = attrs.evolve(first, verdict=attrs.evolve(first.verdict, machine_code="same"))
    moved = _gelu_attempt(2, {**plain, "vector_width": 512}, (2.0, 1.9, 2.1))
    unchanged = Verdict(status="unchanged", message="identical to attempt 1's", machine_code="same")
    moved = attrs.evolve(moved, verdict=unchanged)
    request = CompletionRequest(
        role="conductor",
        messages=(ChatMessage(role="user", content="advise"),),
        task=GELU,
        candidate=moved.candidate,
        verdict=unchanged,
        best=first,
        history=(first,),
    )
    reply = json.loads(advise(request).split("```json")[1].split("```")[0])
    assert "did nothing" in reply["analysis"] and reply["new_best"] is False
    assert "vector_width" not in reply["actions"][0] and "(from attempt 1)" in reply["actions"][0]
    # the idle knob moves only after every other
    moves = rank_moves(
        ELEMENTWISE, plain, [plain], Evidence(), attainment=None, profiled=False, idle=frozenset({"vector_width"})
    )
    assert [changes for changes, _ in moves][-1] == {"vector_width": 512} and "built the same" in moves[-1][1]
    assert all("vector_width" not in changes for changes, _ in moves[:-1])
