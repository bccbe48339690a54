"""Lesson 09's "Serving engines as they are now": every engine fact is cited (file, commit, where, quote), and
the rules it reproduces give the numbers read from the source."""

from __future__ import annotations

import re

import pytest

from graphcourse.lessons import engines as E

HEX40 = re.compile(r"^[0-9a-f]{40}$")
KNOWN_REPOS = {"vllm-project/vllm", "sgl-project/sglang", "pytorch/pytorch"}


@pytest.mark.parametrize("fact", E.FACTS, ids=lambda f: f.key)
def test_every_fact_names_its_file_commit_place_and_quote(fact):
    assert fact.repo in KNOWN_REPOS
    assert re.search(r"\.(py|md)$", fact.file), f"{fact.key}: a file of the repository, got {fact.file!r}"
    assert HEX40.match(fact.commit), f"{fact.key}: the full commit it was read at, got {fact.commit!r}"
    assert len(fact.short_commit) >= 7 and fact.commit.startswith(fact.short_commit)
    assert fact.where.strip(), f"{fact.key}: where in the file"
    assert len(fact.quote) >= 10 and "\n" not in fact.quote, f"{fact.key}: a one-line quote"
    assert fact.quote not in fact.claim, f"{fact.key}: the claim says what the quote shows, not the quote again"
    assert fact.topic in E.TOPICS
    assert E.cite(fact) == f"{fact.file} @ {fact.commit[:8]}, {fact.where}"


def test_facts_are_unique_and_every_topic_has_some():
    keys = [f.key for f in E.FACTS] + [r.key for r in E.REPORTS]
    assert len(keys) == len(set(keys)), "one key per fact"
    quotes = [(f.file, f.quote) for f in E.FACTS]
    assert len(quotes) == len(set(quotes)), "no quote is cited twice from one file"
    for topic in E.TOPICS:
        assert E.facts(topic), f"no fact for {topic}"
    assert sum(len(E.facts(t)) for t in E.TOPICS) == len(E.facts()) == len(E.FACTS)
    with pytest.raises(ValueError, match="unknown topic"):
        E.facts("graphs")


def test_quotes_carry_the_names_the_claims_are_about():
    by_key = {f.key: f for f in E.FACTS}
    assert "FULL_AND_PIECEWISE" in by_key["mode_pairs"].quote
    assert "VLLM_USE_BREAKABLE_CUDAGRAPH" in by_key["breakable_env"].quote
    assert "cudagraph_specialize_lora" in by_key["lora_specialize"].quote
    assert "weak_ref_tensors" in by_key["wrapper_weak_output"].quote
    assert "get_global_graph_pool" in by_key["wrapper_global_pool"].quote
    assert "TC_PIECEWISE" in by_key["sglang_prefill_default"].quote
    assert "uniform_decode_query_len" in by_key["spec_decode_keys"].quote
    # the four support levels, each from the enum's own docstrings or the builder's default
    levels = {f.key for f in E.facts("modes") if f.key.startswith("cg_support_")}
    assert levels == {"cg_support_always", "cg_support_uniform", "cg_support_single", "cg_support_never"}


@pytest.mark.parametrize("report", E.REPORTS, ids=lambda r: r.key)
def test_thread_reports_link_to_their_thread(report):
    assert report.repo in KNOWN_REPOS and report.number > 0 and report.kind in ("issue", "pull request")
    assert re.match(rf"^https://github\.com/{re.escape(report.repo)}/(issues|pull)/{report.number}$", report.url)
    assert ("/issues/" in report.url) == (report.kind == "issue")
    assert len(report.quote) >= 10 and report.title and report.claim


def test_fact_lines_print_each_claim_with_its_citation_within_the_width():
    lines = E.fact_lines("lora", width=100)
    assert all(len(line) <= 100 for line in lines)
    text = " ".join(lines)
    for f in E.facts("lora"):
        assert f.short_commit in text and f.file in text
    assert sum(line.startswith("- ") for line in lines) == len(E.facts("lora"))
    reports = E.report_lines("speculative")
    assert any("vllm-project/vllm#54997" in line for line in reports)
    assert E.report_lines("lora") == []


def test_sglang_prefill_schedule_is_the_rule_read_at_001067ff():
    sizes = E.sglang_prefill_token_sizes(8192)
    assert sizes[:9] == (4, 8, 12, 16, 20, 24, 28, 32, 48)
    assert [s for s in sizes if 256 < s <= 512] == list(range(288, 513, 32))
    assert [s for s in sizes if 512 < s <= 1024] == list(range(576, 1025, 64))
    assert [s for s in sizes if 1024 < s <= 4096] == list(range(1280, 4097, 256))
    assert [s for s in sizes if s > 4096] == list(range(4608, 8193, 512))
    assert len(sizes) == 8 + 14 + 8 + 8 + 12 + 8 == 58
    assert len(E.sglang_prefill_token_sizes(2048)) == 8 + 14 + 8 + 8 + 4
    assert E.sglang_prefill_token_sizes(1000)[-1] == 960, "the largest size is not added when off the grid"
    assert list(sizes) == sorted(set(sizes))
    with pytest.raises(ValueError):
        E.sglang_prefill_token_sizes(0)
    assert E.sglang_prefill_max_tokens() == 8192 and E.sglang_prefill_max_tokens(mla=True) == 2048
    assert E.sglang_prefill_max_tokens(8192, max_total_tokens=5000) == 5000


def test_vllm_full_decode_sizes_keep_the_sizes_between_q_and_q_times_max_num_seqs():
    sizes = (1, 2, 4, 8, 16, 24, 32)
    assert E.vllm_full_decode_sizes(sizes, 0, 8) == (1, 2, 4, 8)           # plain decode: 1 .. max_num_seqs
    assert E.vllm_full_decode_sizes(sizes, 2, 4) == (4, 8)                 # q = 3: 3 .. 12
    assert E.vllm_full_decode_sizes(sizes, 3, 100) == (4, 8, 16, 24, 32)   # q = 4: nothing below 4
    assert E.vllm_full_decode_sizes(reversed(sizes), 0, 2) == (1, 2)
    with pytest.raises(ValueError):
        E.vllm_full_decode_sizes(sizes, -1, 4)


def test_graphs_to_capture_multiplies_sizes_by_lora_variants():
    assert E.graphs_to_capture(51) == 51 and E.graphs_to_capture(51, 2) == 102 and E.graphs_to_capture(0, 3) == 0
    with pytest.raises(ValueError):
        E.graphs_to_capture(5, 0)


def test_try_answers_compute_their_figures():
    prefill = E.try_answer("Compare SGLang's prefill sizes up to 8192 tokens with those up to 2048 (MLA).")
    assert prefill and "58 prefill sizes" in prefill and "42 up to 2048" in prefill and "464 MB" in prefill
    spec = E.try_answer("With 2 speculative tokens and max_num_seqs=64, which sizes get FULL decode keys?")
    assert spec and spec.startswith("46 sizes; 28 of them") and "11 multiples of 3" in spec
    lora = E.try_answer("How many graphs does LoRA specialisation add to vLLM's default list?")
    assert lora and "51 capture keys without LoRA" in lora and "102" in lora
    assert E.try_answer("something else") is None


def test_the_toy_tables_follow_toygraph_dispatch():
    from toygraph.dispatch import AttentionCGSupport as A
    from toygraph.dispatch import CUDAGraphMode as M

    lines = E.downgrade_lines([(M.FULL, A.UNIFORM_BATCH, 0), (M.FULL_AND_PIECEWISE, A.NEVER, 0),
                               (M.FULL_AND_PIECEWISE, A.UNIFORM_SINGLE_TOKEN_DECODE, 2),
                               (M.FULL, A.NEVER, 0), (M.FULL, A.ALWAYS, 0)])
    assert [line.rsplit(": ", 1)[1] for line in lines] == [
        "FULL_AND_PIECEWISE", "PIECEWISE", "PIECEWISE", "refuses to start (UnsupportedModeError)", "FULL"]
    table = E.dispatch_table({"5 decodes": [1] * 5, "mixed": [1, 1, 9], "40 decodes": [1] * 40},
                             [1, 2, 4, 8, 16, 32], [M.FULL_AND_PIECEWISE, M.FULL_DECODE_ONLY])
    assert table[0].startswith("batch") and len(table) == 4
    cells = [[c.strip() for c in row.split(" | ")[1:]] for row in table[1:]]
    assert cells == [["FULL @ 8", "FULL @ 8"], ["PIECEWISE @ 16", "NONE @ 11"], ["NONE @ 40", "NONE @ 40"]]
    assert all(row == row.rstrip() for row in table)
    spec = E.dispatch_table({"4 x (1 + 2)": [3] * 4}, [3, 6, 12, 24], [M.FULL_AND_PIECEWISE],
                            num_speculative_tokens=2)
    assert spec[1].split(" | ")[1].strip() == "FULL @ 12"
